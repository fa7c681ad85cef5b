"""The native extension, for test modules that cannot run without it.

`from native_required import _native` in a test module. A build whose
extension does not import has already failed the session (conftest.py);
with SDS_LOADER_ALLOW_NO_NATIVE=1, a run meant to go without it, the
module is skipped instead, saying why.
"""

from __future__ import annotations

import os

import pytest

try:
    from sds_loader import _native  # noqa: F401
except ImportError as exc:
    if os.environ.get("SDS_LOADER_ALLOW_NO_NATIVE") != "1":
        raise
    pytest.skip(
        f"SDS_LOADER_ALLOW_NO_NATIVE=1 and sds_loader._native does not import ({exc})",
        allow_module_level=True,
    )
