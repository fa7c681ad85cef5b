"""Where the checkout and the suite's shared modules are, for tests that start programs of their own."""

from __future__ import annotations

import os

#: The checkout's root (README.md, src/, examples/).
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: This folder: what a child Python needs on its path to import the suite's helpers.
SUPPORT = os.path.dirname(os.path.abspath(__file__))
