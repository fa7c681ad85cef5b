"""Session-wide checks for the test suite.

The native extension is what this project is: a build whose `_native` does
not import must fail the run, not pass it with the core suites skipped. So
the session stops at once with the import error, unless
SDS_LOADER_ALLOW_NO_NATIVE=1 says a run without it is intended (a quick
check of the pure-Python parts on a machine that cannot build it); then the
test modules that need it (they import it through support/native_required.py) skip,
saying why.
"""

from __future__ import annotations

import os
import sys

import pytest
from repo_paths import REPO

#: The servers' fixtures (tests/support), for every test that names one as an argument.
pytest_plugins = ("s3_fixtures", "gcs_fixtures")

# Test modules are imported by path under the names `tests.<area>.<module>`
# (--import-mode=importlib), and a spawned worker unpickles what a test
# defines by that name, on the path its parent had. The checkout's root on
# the path makes `tests` importable there however pytest was started (as a
# script, say, whose own folder is the path's first entry rather than the
# working directory).
if REPO not in sys.path:
    sys.path.append(REPO)

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


# -- slow tests ----------------------------------------------------------------

#: The tests over about 2 s each on the 2-core machine (tests/slow_tests.txt):
#: marked `slow`, which the Quick start's command leaves to CI's second step.
SLOW_TESTS = os.path.join(REPO, "tests", "slow_tests.txt")


def _slow_test_ids() -> frozenset[str]:
    with open(SLOW_TESTS, encoding="utf-8") as listing:
        return frozenset(
            line.strip() for line in listing if line.strip() and not line.lstrip().startswith("#")
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    slow = _slow_test_ids()
    for item in items:
        if item.nodeid in slow:
            item.add_marker(pytest.mark.slow)


# -- the sanitizer build ------------------------------------------------------

#: Set by scripts/test_sanitized.sh, which runs this suite with GCC's
#: AddressSanitizer preloaded into the interpreter.
SANITIZED = "SDS_LOADER_SANITIZED"

if os.environ.get(SANITIZED) == "1":
    # GCC 12's AddressSanitizer does not hold its allocator's locks across
    # fork(): a child forked while any other thread (torch's, OpenBLAS's, the
    # reader's) is inside malloc or free waits forever for a lock that no
    # thread of the child will release, as one DataLoader worker did. glibc's
    # allocator is fork-safe, so the tests that fork run in the plain suite;
    # under the sanitizer they are skipped where they fork. Spawned processes
    # and subprocesses start afresh and still run.
    def _fork_refused() -> int:
        pytest.skip("forks while threads run, which this AddressSanitizer build cannot do safely")

    os.fork = _fork_refused


# -- folders on a disk ---------------------------------------------------------

#: Where tests that need pages dropped from the page cache write their files:
#: under the checkout, on the disk it lives on, where the system temporary
#: folder may be tmpfs (whose pages are the files, and are never dropped).
DISK_ROOT = os.path.join(REPO, ".pytest-disk")


@pytest.fixture(scope="session")
def disk_path_factory():
    """Makes fresh folders under DISK_ROOT; removes them when the session ends."""
    import itertools
    import pathlib
    import shutil
    import tempfile

    os.makedirs(DISK_ROOT, exist_ok=True)
    session = tempfile.mkdtemp(prefix=f"session-{os.getpid()}-", dir=DISK_ROOT)
    numbers = itertools.count()

    def make(name: str) -> pathlib.Path:
        path = (
            pathlib.Path(session) / f"{''.join(c if c.isalnum() else '-' for c in name)[:48]}-{next(numbers)}"
        )
        path.mkdir()
        return path

    try:
        yield make
    finally:
        shutil.rmtree(session, ignore_errors=True)
        try:
            os.rmdir(DISK_ROOT)  # only when no other session is using it
        except OSError:
            pass


@pytest.fixture
def disk_path(disk_path_factory, request):
    """A fresh folder on the checkout's disk, for a test that drops cached pages."""
    return disk_path_factory(request.node.name)
