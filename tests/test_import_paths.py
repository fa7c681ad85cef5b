"""Every public import path of earlier versions still works, and names the module it moved to."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

MOVED = {
    "sds_loader.torch_buffers": "sds_loader.torch.buffers",
    "sds_loader.torch_ring": "sds_loader.torch.ring",
    "sds_loader.torch_mixture": "sds_loader.torch.mixture",
    "sds_loader.stores": "sds_loader.storage.stores",
    "sds_loader.s3_source": "sds_loader.storage.s3_source",
    "sds_loader.sources": "sds_loader.storage.sources",
    "sds_loader.fallback": "sds_loader.storage.fallback",
    "sds_loader.fallback_helper": "sds_loader.storage.fallback_helper",
    "sds_loader.remote_readahead": "sds_loader.storage.remote_readahead",
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_is_the_moved_module_itself(old):
    if old.startswith("sds_loader.torch"):
        import torch_required  # noqa: F401 - skips this case without torch
    # The same module object, so that state and monkeypatching agree whichever name is used.
    assert importlib.import_module(old) is importlib.import_module(MOVED[old])


def test_old_paths_import_first_in_a_fresh_interpreter():
    import torch_required  # noqa: F401 - skips this test without torch

    # Imported before anything else has loaded the new paths.
    code = "; ".join(
        [f"import {old}" for old in MOVED]
        + [
            "from sds_loader.torch import SDSTorchDataset, collate, Mixture",
            "from sds_loader.torch_buffers import PagePool",
            "from sds_loader.fallback import FallbackReader",
            "import sds_loader.storage.fallback as new, sds_loader.fallback as old",
            "assert new is old",
        ]
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]


def test_the_storage_package_has_no_import_cycle():
    # fallback talks to its helper through helper_protocol, not by importing it.
    import ast
    import pathlib

    import sds_loader.storage

    folder = pathlib.Path(sds_loader.storage.__file__).parent
    tree = ast.parse((folder / "fallback.py").read_text())
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
            imported.update(f"{node.module}.{alias.name}" for alias in node.names)
    assert "sds_loader.storage.fallback_helper" not in imported
    assert "sds_loader.storage.helper_protocol" in imported
