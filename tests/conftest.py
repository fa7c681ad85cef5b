"""Session-wide checks for the test suite.

The native extension is what this project is: a build whose `_native` does
not import must fail the run, not pass it with the core suites skipped. So
the session stops at once with the import error, unless
SDS_LOADER_ALLOW_NO_NATIVE=1 says a run without it is intended (a quick
check of the pure-Python parts on a machine that cannot build it); then the
test modules that need it (they import it through native_required.py) skip,
saying why.
"""

from __future__ import annotations

import os

import pytest

#: Set to 1 to run without the native extension (modules that need it skip).
ALLOW_NO_NATIVE = "SDS_LOADER_ALLOW_NO_NATIVE"


def native_import_problem() -> str | None:
    """Why `sds_loader._native` does not import here, or None when it does."""
    try:
        import sds_loader._native  # noqa: F401
    except ImportError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def pytest_configure(config: pytest.Config) -> None:
    problem = native_import_problem()
    if problem is not None and os.environ.get(ALLOW_NO_NATIVE) != "1":
        raise pytest.UsageError(
            f"sds_loader._native does not import ({problem}), so the native reader this suite "
            "tests is missing. Build it with `bash scripts/bootstrap.sh` (or `pip install -e .`); "
            f"to run only the tests that need no extension, set {ALLOW_NO_NATIVE}=1."
        )
