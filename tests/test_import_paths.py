"""Module paths that moved in 0.3 are gone, and the storage package imports nothing of the core."""

from __future__ import annotations

import importlib

import pytest

#: Where the modules of 0.2's flat package root went.
MOVED = {
    "sds_loader.torch_buffers": "sds_loader.torch.buffers",
    "sds_loader.torch_ring": "sds_loader.torch.ring",
    "sds_loader.torch_mixture": "sds_loader.torch.mixture",
    "sds_loader.stores": "sds_loader.storage.stores",
    "sds_loader.s3_source": "sds_loader.storage.s3_source",
    "sds_loader.sources": "sds_loader.storage.sources",
    "sds_loader.fallback": "sds_loader.fallback",
    "sds_loader.fallback_helper": "sds_loader.fallback_helper",
    "sds_loader.remote_readahead": "sds_loader.storage.remote_readahead",
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_is_gone_and_the_new_one_imports(old: str) -> None:
    if old.startswith("sds_loader.torch"):
        import torch_required  # noqa: F401 - skips this case without torch
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)
    assert importlib.import_module(MOVED[old]).__name__ == MOVED[old]


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
    assert "sds_loader.fallback_helper" not in imported
    assert "sds_loader.fallback_protocol" in imported
