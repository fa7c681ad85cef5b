"""The native core's includes run downward, stage by stage, and no unit grows past two jobs.

`csrc/` is laid out as the bytes flow (csrc/README.md): `base/` under
`container/` (Riegeli and ArrayRecord framing, read through
`RandomAccessBytes`), `record/` (one record's header and descriptor),
`sources/` (where a shard's bytes live), `read/` (a batch), `tools/`, and
the binding in `python/` on top. A stage that includes one above it is how
a layer starts to know what it serves, so every `#include "folder/..."` of
every file is checked here; so is the size of each unit, since one over 600
lines has usually taken on a second job.
"""

from __future__ import annotations

import pathlib
import re

import pytest
from repo_paths import REPO

ROOT = pathlib.Path(REPO)
CSRC = ROOT / "csrc"
LAYERS = ["base", "augment", "container", "record", "sources", "read", "tools", "python"]
INCLUDE = re.compile(r'^#include "([a-z_]+)/[^"]+"', re.MULTILINE)


def units() -> list:
    return sorted(p for p in CSRC.glob("*/*") if p.suffix in (".h", ".cc"))


def test_every_folder_of_the_core_has_its_place_in_the_layers():
    assert sorted(p.name for p in CSRC.iterdir() if p.is_dir()) == sorted(LAYERS)


@pytest.mark.parametrize("unit", units(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_includes_run_downward(unit):
    here = LAYERS.index(unit.parent.name)
    upward = [
        folder
        for folder in INCLUDE.findall(unit.read_text())
        if folder in LAYERS and LAYERS.index(folder) > here
    ]
    assert not upward, f"{unit.relative_to(ROOT)} includes from a stage above it: {upward}"


def test_no_unit_is_over_600_lines():
    long = {str(p.relative_to(ROOT)): n for p in units() if (n := len(p.read_text().splitlines())) > 600}
    assert not long, long
