"""scripts/build_wheel.sh makes a manylinux wheel that installs and reads without -dev packages.

The wheel is built for the interpreter running the suite (reusing the
editable install's build directory, so after a bootstrap little is
compiled), repaired by auditwheel, and installed with pip into a fresh
virtual environment. There it reads a dataset written by signal_dataset,
byte for byte as signal_dataset reads it. scripts/test_python.sh, which runs
the suite on Python 3.12 and 3.13 against the wheel it built for each, names
that wheel in SDS_LOADER_WHEEL, and these tests check it instead of building
another.

That the machine has no -dev package cannot be arranged in a test; instead
the extension's dynamic dependencies are checked to be the C and C++
runtimes and the libcurl grafted into the wheel, so the codecs and
HighwayHash it uses are the ones linked into it.

Marked `wheel` (deselect with -m "not wheel"): it takes tens of seconds.
"""

from __future__ import annotations

import email.message
import email.parser
import glob
import importlib.metadata
import os
import re
import subprocess
import sys
import sysconfig
import textwrap
import zipfile

import pytest
import sds_factory
from packaging.specifiers import SpecifierSet
from repo_paths import REPO

#: What a manylinux extension may load from the system (the rest must be inside it).
RUNTIMES = (
    "libc.so",
    "libm.so",
    "libstdc++.so",
    "libgcc_s.so",
    "libpthread.so",
    "libdl.so",
    "librt.so",
    "ld-linux",
)

#: A wheel built for this interpreter already, to check instead of building one.
PREBUILT = "SDS_LOADER_WHEEL"

pytestmark = pytest.mark.wheel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> str:
    if os.environ.get(PREBUILT):
        return os.environ[PREBUILT]
    dist = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        ["bash", os.path.join(REPO, "scripts", "build_wheel.sh"), os.fspath(dist)],
        env=dict(os.environ, PYTHON=sys.executable),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    [built] = glob.glob(os.path.join(dist, "sds_loader-*.whl"))
    return built


def test_the_wheel_is_manylinux_with_the_libraries_inside(wheel, tmp_path):
    assert re.search(r"-manylinux_\d+_\d+_x86_64\.whl$|-manylinux\d*_x86_64\.whl$", wheel), wheel
    with zipfile.ZipFile(wheel) as archive:
        [extension] = [name for name in archive.namelist() if re.match(r"sds_loader/_native\..*\.so$", name)]
        archive.extract(extension, tmp_path)
        bundled = [name for name in archive.namelist() if name.startswith("sds_loader.libs/")]
    dynamic = subprocess.run(
        ["readelf", "--dynamic", os.fspath(tmp_path / extension)], capture_output=True, text=True, check=True
    ).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", dynamic)
    assert needed, dynamic
    for library in needed:
        # libcurl (with its TLS and HTTP stack) is the one library grafted
        # beside the extension by auditwheel, renamed with a hash.
        grafted = re.fullmatch(r"libcurl-[0-9a-f]{8}\.so[.0-9]*", library)
        assert library.startswith(RUNTIMES) or grafted, f"{library} is loaded from the system: {needed}"
    curl = re.compile(r"sds_loader\.libs/libcurl-[0-9a-f]{8}\.so[.0-9]*")
    assert any(curl.fullmatch(name) for name in bundled), bundled


def wheel_metadata(wheel: str) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        [metadata] = [
            name for name in archive.namelist() if re.fullmatch(r"sds_loader-[^/]+\.dist-info/METADATA", name)
        ]
        return email.parser.BytesParser().parsebytes(archive.read(metadata))


def test_the_wheel_is_for_this_python_and_names_the_pythons_signal_dataset_supports(wheel):
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert os.path.basename(wheel).split("-")[2:4] == [tag, tag], wheel
    info = wheel_metadata(wheel)
    supported = SpecifierSet(info["Requires-Python"])
    theirs = importlib.metadata.metadata("signal-dataset")["Requires-Python"]
    assert supported == SpecifierSet(theirs), (info["Requires-Python"], theirs)
    # A classifier for each minor version in that range (CI tests each), none beyond it.
    listed = {
        classifier.rsplit(" :: ", 1)[1]
        for classifier in info.get_all("Classifier", [])
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", classifier)
    }
    assert listed == {f"3.{minor}" for minor in range(40) if f"3.{minor}" in supported}, sorted(listed)
    assert version in listed, (version, sorted(listed))


def test_the_wheel_carries_the_licence_and_the_third_party_notices(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        [metadata] = [name for name in names if re.fullmatch(r"sds_loader-[^/]+\.dist-info/METADATA", name)]
        info = archive.read(metadata).decode("utf-8")
        carried = {}
        for name in names:
            found = re.fullmatch(r"sds_loader-[^/]+\.dist-info/licenses/(.+)", name)
            if found:
                carried[found.group(1)] = archive.read(name)
    assert sorted(carried) == ["LICENSE", "THIRD_PARTY_NOTICES"], sorted(carried)
    for name, content in carried.items():
        with open(os.path.join(REPO, name), "rb") as handle:
            assert content == handle.read(), f"{name} in the wheel differs from the repository's"
    assert "License-Expression: Apache-2.0" in info.splitlines(), info[:2000]
    assert {"License-File: LICENSE", "License-File: THIRD_PARTY_NOTICES"} <= set(info.splitlines())


def test_the_wheel_is_typed(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert {"sds_loader/py.typed", "sds_loader/_native.pyi"} <= names, sorted(names)


def test_the_wheel_installs_into_a_fresh_environment_and_reads(wheel, tmp_path):
    root = tmp_path / "captures.sds"
    sds_factory.write_dataset(root, 12, records_per_shard=4)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", os.fspath(venv)], check=True, timeout=300)
    python = os.fspath(venv / "bin" / "python")
    # Offline and quick: the wheel alone from its file, and this environment's
    # numpy and signal_dataset seen through a .pth (never its sds_loader: a
    # .pth line adds a directory, it does not run the editable install's hook).
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", wheel], check=True, timeout=300
    )
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    visible = [path for path in sys.path if path in ours or path.endswith(("site-packages", "dist-packages"))]
    with open(os.path.join(site, "parent_environment.pth"), "w", encoding="utf-8") as handle:
        handle.write("\n".join(dict.fromkeys(visible)) + "\n")
    child = textwrap.dedent(
        f"""
        import numpy as np, signal_dataset as sds, sds_loader
        from sds_loader import _native
        assert sds_loader.__file__.startswith({os.fspath(venv)!r}), sds_loader.__file__
        assert _native.__file__.startswith({os.fspath(venv)!r}), _native.__file__
        reader = sds_loader.BatchReader({os.fspath(root)!r}, targets=("label",))
        order = [11, 0, 5, 5, 3]
        batch = reader.read(order)
        reference = sds.open({os.fspath(root)!r})
        for row, ordinal in enumerate(order):
            assert batch["samples"][row].tobytes() == reference[ordinal]["samples"].data.tobytes()
            assert batch["label"][row] == reference[ordinal].metadata["label"]
        assert reader.stats.native_records == len(order), reader.stats
        print("read", len(order), "records natively from", _native.__file__)
        """
    )
    done = subprocess.run([python, "-c", child], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("read 5 records natively from ")
