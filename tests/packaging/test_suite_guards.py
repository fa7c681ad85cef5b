"""The suite itself refuses to pass on a build whose native extension is missing.

A child pytest runs with `sds_loader._native` made unimportable (None in
sys.modules, which is what a failed import leaves a caller) and only
collects, so each case costs an interpreter start, not a test run.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys

from repo_paths import REPO

TESTS = os.path.join(REPO, "tests")


def suite_files() -> list[str]:
    """Every Python file of the suite but this one, as paths below tests/."""
    found = glob.glob(os.path.join(TESTS, "**", "*.py"), recursive=True)
    return sorted(os.path.relpath(path, TESTS) for path in found if path != os.path.abspath(__file__))


CHILD = (
    "import sys; sys.modules['sds_loader._native'] = None; import pytest; "
    "sys.exit(pytest.main(['-q', '--collect-only', '-p', 'no:cacheprovider', *sys.argv[1:]]))"
)


def collect_without_native(*files: str, allow: bool) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("SDS_LOADER_ALLOW_NO_NATIVE", None)
    if allow:
        env["SDS_LOADER_ALLOW_NO_NATIVE"] = "1"
    return subprocess.run(
        [sys.executable, "-c", CHILD, *(os.path.join(TESTS, name) for name in files)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=env,
    )


def test_a_missing_extension_fails_the_session():
    child = collect_without_native("core/test_corruption.py", "core/test_arguments.py", allow=False)
    output = child.stdout + child.stderr
    assert child.returncode not in (0, 5), output  # 5: "no tests collected" would pass CI
    assert "sds_loader._native does not import" in output and "scripts/bootstrap.sh" in output, output
    assert "SDS_LOADER_ALLOW_NO_NATIVE=1" in output, output


def test_allowing_it_skips_the_modules_that_need_it():
    child = collect_without_native("core/test_corruption.py", "core/test_arguments.py", allow=True)
    output = child.stdout + child.stderr
    assert child.returncode == 0, output
    assert "SDS_LOADER_ALLOW_NO_NATIVE=1 and sds_loader._native does not import" in output, output
    assert "test_arguments.py::" in output and "test_corruption.py::" not in output, output


def test_every_file_that_needed_the_extension_now_imports_it():
    """`pytest.importorskip` of the extension is what let a broken build pass."""
    for name in suite_files():
        with open(os.path.join(TESTS, name), encoding="utf-8") as handle:
            text = handle.read()
            assert 'importorskip("sds_loader._native")' not in text, name
            assert "HAS_NATIVE" not in text, name
            assert "\nfrom sds_loader import _native" not in text, f"{name}: import it from native_required"


def test_no_test_skips_because_its_folder_keeps_pages():
    """Tests that drop cached pages write on the checkout's disk (the
    `disk_path` fixtures) and fail when the pages stay, rather than skip
    whenever the temporary folder happens to be tmpfs."""
    for name in suite_files():
        with open(os.path.join(TESTS, name), encoding="utf-8") as handle:
            text = handle.read()
            assert "keeps the pages cached" not in text and "(tmpfs, say)" not in text, name


def test_the_disk_folder_is_on_a_disk(disk_path):
    with open("/proc/mounts", encoding="utf-8") as handle:
        mounts = [line.split()[1:3] for line in handle]
    path = os.path.realpath(disk_path)
    point, kind = max(
        ((p, k) for p, k in mounts if path == p or path.startswith(p.rstrip("/") + "/")),
        key=lambda item: len(item[0]),
    )
    assert kind not in ("tmpfs", "ramfs"), f"{path} is on {kind} ({point})"
    assert ".pytest-disk" in path and os.path.isdir(path)
