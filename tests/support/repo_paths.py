"""Where the checkout and the suite's shared modules are, for tests that start programs of their own."""

from __future__ import annotations

import importlib.util
import os
from types import ModuleType

#: The checkout's root (README.md, src/, examples/).
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: This folder: what a child Python needs on its path to import the suite's helpers.
SUPPORT = os.path.dirname(os.path.abspath(__file__))


def load_program(*path: str) -> ModuleType:
    """The checkout's program at `path` (say "examples", "train_classifier.py") as a module, its
    `if __name__ == "__main__"` part not run: a test calls its functions."""
    where = os.path.join(REPO, *path)
    spec = importlib.util.spec_from_file_location(os.path.splitext(path[-1])[0], where)
    assert spec is not None and spec.loader is not None, where
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
