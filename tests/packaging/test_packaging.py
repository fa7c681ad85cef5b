"""What a package people depend on must say about itself: version, licence, notices.

The wheel's share of this is in tests/packaging/test_wheel.py (it builds one); here the
source distribution, which scikit-build-core makes without compiling, and the
notices file against what third_party/ vendors.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import tomllib

from repo_paths import REPO

import sds_loader


def test_the_sdist_carries_the_licence_and_the_third_party_notices(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from scikit_build_core.build import build_sdist; print(build_sdist({os.fspath(tmp_path)!r}))",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    name = done.stdout.strip().splitlines()[-1]
    with tarfile.open(tmp_path / name) as archive:
        top = name.removesuffix(".tar.gz")
        members = set(archive.getnames())
        pkg_info = archive.extractfile(f"{top}/PKG-INFO")
        assert pkg_info is not None
        info = pkg_info.read().decode("utf-8")
    for licence in (
        "LICENSE",
        "THIRD_PARTY_NOTICES",
        "third_party/zstd/LICENSE",
        "third_party/snappy/COPYING",
    ):
        assert f"{top}/{licence}" in members, licence
    assert "License-Expression: Apache-2.0" in info.splitlines()


def test_the_notices_name_every_vendored_library_and_the_licence_is_apache_2():
    with open(os.path.join(REPO, "THIRD_PARTY_NOTICES"), encoding="utf-8") as handle:
        notices = handle.read()
    for vendored in sorted(os.listdir(os.path.join(REPO, "third_party"))):
        assert f"third_party/{vendored}" in notices, f"THIRD_PARTY_NOTICES does not list {vendored}"
    # Linked in from the build machine's static archives (CMakeLists.txt).
    for linked in ("brotli", "HighwayHash", "RapidJSON", "nlohmann/json", "pybind11"):
        assert linked in notices, linked
    with open(os.path.join(REPO, "LICENSE"), encoding="utf-8") as handle:
        licence = handle.read()
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    assert "END OF TERMS AND CONDITIONS" in licence and "APPENDIX: How to apply" in licence


def test_one_version_read_by_the_package_the_command_and_the_metadata():
    installed = importlib.metadata.version("sds-loader")
    assert sds_loader.__version__ == installed, (
        f"sds_loader.__version__ is {sds_loader.__version__} but the installed metadata says {installed}: "
        "reinstall (pip install --no-build-isolation -e .) after changing src/sds_loader/_version.py"
    )
    assert re.fullmatch(r"\d+\.\d+\.\d+", installed), installed
    command = os.path.join(sysconfig.get_path("scripts"), "sds-loader")
    for argv in ([command, "--version"], [sys.executable, "-m", "sds_loader", "--version"]):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.strip() == f"sds-loader {installed}", (argv, done.stdout)
    # Written once: pyproject.toml takes it from _version.py, never states its own.
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as handle:
        pyproject = tomllib.load(handle)
    assert "version" not in pyproject["project"] and "version" in pyproject["project"]["dynamic"]
    source = pyproject["tool"]["scikit-build"]["metadata"]["version"]["input"]
    with open(os.path.join(REPO, source), encoding="utf-8") as handle:
        assert f'__version__ = "{installed}"' in handle.read()
