"""`scripts/release.sh` builds from a tag's tree, and refuses a tag that does not name a release."""

from __future__ import annotations

import os
import shutil
import subprocess

from repo_paths import REPO


def clone_of_repo(tmp_path) -> str:
    """A clone of the checkout's commits, with this checkout's release.sh (committed or not)."""
    clone = str(tmp_path / "clone")
    subprocess.run(["git", "clone", "-q", REPO, clone], check=True)
    shutil.copy(os.path.join(REPO, "scripts", "release.sh"), os.path.join(clone, "scripts", "release.sh"))
    return clone


def release(clone: str, tag: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "scripts/release.sh", tag, "dist-test"], cwd=clone, capture_output=True, text=True
    )


def test_a_missing_tag_is_refused_with_how_to_make_it(tmp_path) -> None:
    clone = clone_of_repo(tmp_path)
    result = release(clone, "v0.0.0-missing")
    assert result.returncode == 1
    assert "there is no tag v0.0.0-missing" in result.stderr and "git tag -a" in result.stderr
    assert not (tmp_path / "clone" / "dist-test").exists()


def test_a_tag_whose_tree_says_another_version_is_refused(tmp_path) -> None:
    clone = clone_of_repo(tmp_path)
    subprocess.run(["git", "tag", "v9.9.9"], cwd=clone, check=True)
    result = release(clone, "v9.9.9")
    assert result.returncode == 1
    assert "does not say version 9.9.9" in result.stderr
    assert not (tmp_path / "clone" / "dist-test").exists()
