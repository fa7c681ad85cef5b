"""Spawned workers get the shard tables beside their pickle, in a file (`spawn_tables`).

A pickle larger than a pipe holds the parent in its write until the child
has imported torch, so a DataLoader's spawned workers would start one after
another. The file is checked against the digest the pickle carries, written
once per process, removed when that process exits, and a child that cannot
use it builds its own tables: the rows are signal_dataset's either way.
"""

from __future__ import annotations

from torch_required import torch  # noqa: F401 - skips this module without torch

import os
import pickle
import subprocess
import sys
import tempfile
import textwrap
from multiprocessing import context as mp_context

import pytest
import signal_dataset as sds
from manifest_reads import refuse_manifest_reads
from sds_factory import write_dataset
from torch.utils.data import DataLoader

from sds_loader import spawn_tables
from sds_loader.dataset import export_tables
from sds_loader.torch import SDSTorchDataset, collate

FOLDER = os.path.join(tempfile.gettempdir(), spawn_tables.FOLDER)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("spawn-tables") / "ds"
    write_dataset(path, 40, records_per_shard=2, shards_per_manifest=4)
    return str(path)


def own_files() -> list[str]:
    prefix = f"tables-{os.getpid()}-"
    return sorted(name for name in os.listdir(FOLDER) if name.startswith(prefix))


def tables_of(root: str) -> dict[str, object]:
    SDSTorchDataset(root, threads=1).shard_table()  # builds and keeps them in this process
    tables = export_tables(sds.open(root))
    assert tables
    return tables


def parcel_for_spawn(tables: dict[str, object]) -> object:
    mp_context.set_spawning_popen(object())
    try:
        return spawn_tables.parcel(tables)
    finally:
        mp_context.set_spawning_popen(None)


def paths_of(tables: dict[str, object]) -> dict[str, list[str]]:
    return {key: list(table.paths) for key, table in tables.items()}  # type: ignore[attr-defined]


def test_spawned_workers_take_their_tables_from_the_file(root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spawn_tables, "INLINE_BYTES", 0)
    dataset = SDSTorchDataset(root, threads=1)
    loader = DataLoader(
        dataset,
        batch_size=4,
        num_workers=2,
        multiprocessing_context="spawn",
        worker_init_fn=refuse_manifest_reads,
        collate_fn=collate,
    )
    reference = sds.open(root)
    expected = [reference[i]["samples"].data.tobytes() for i in range(len(reference))]
    for _ in range(2):  # new workers each epoch, the same file
        assert [row.numpy().tobytes() for batch in loader for row in batch["inputs"]] == expected
    assert len(own_files()) == 1


def test_only_a_pickle_for_a_spawned_child_leaves_the_tables_out(
    root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    tables = tables_of(root)
    inline = len(pickle.dumps(tables))
    assert spawn_tables.parcel(tables) is tables  # Ray's or a user's pickle: inline
    monkeypatch.setattr(spawn_tables, "INLINE_BYTES", inline)
    assert parcel_for_spawn(tables) is tables  # small enough for the pipe
    monkeypatch.setattr(spawn_tables, "INLINE_BYTES", 0)
    carried = parcel_for_spawn(tables)
    assert isinstance(carried, spawn_tables.TablesFile)
    assert len(pickle.dumps(carried)) < min(inline, 512)
    assert paths_of(spawn_tables.unpack(pickle.loads(pickle.dumps(carried)))) == paths_of(tables)


@pytest.mark.parametrize("damage", ["a byte changed", "cut short", "removed", "a link"])
def test_a_file_that_does_not_match_its_digest_is_not_used(
    root: str, monkeypatch: pytest.MonkeyPatch, tmp_path, damage: str
) -> None:
    monkeypatch.setattr(spawn_tables, "INLINE_BYTES", 0)
    carried = parcel_for_spawn(tables_of(root))
    assert isinstance(carried, spawn_tables.TablesFile)
    good = open(carried.path, "rb").read()
    try:
        if damage == "a byte changed":
            with open(carried.path, "r+b") as file:
                file.seek(len(good) // 2)
                file.write(bytes([good[len(good) // 2] ^ 1]))
        elif damage == "cut short":
            os.truncate(carried.path, len(good) - 1)
        elif damage == "removed":
            os.unlink(carried.path)
        else:
            copy = tmp_path / "copy"
            copy.write_bytes(good)
            os.unlink(carried.path)
            os.symlink(copy, carried.path)
        assert spawn_tables.unpack(carried) == {}  # the child builds its own tables
    finally:
        if os.path.lexists(carried.path):
            os.unlink(carried.path)
        with open(carried.path, "wb") as file:  # as this process wrote it, for the tests after
            file.write(good)


def test_a_process_removes_its_files_at_exit_and_those_of_processes_gone(root: str) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    os.makedirs(FOLDER, mode=0o700, exist_ok=True)
    orphan = os.path.join(FOLDER, f"tables-{gone.pid}-{'0' * 32}")
    with open(orphan, "wb") as file:
        file.write(b"left by a process that was killed")
    script = textwrap.dedent(
        f"""
        from multiprocessing import context
        from sds_loader import spawn_tables
        from sds_loader.dataset import export_tables
        from sds_loader.torch import SDSTorchDataset
        import signal_dataset as sds
        SDSTorchDataset({root!r}, threads=1).shard_table()
        spawn_tables.INLINE_BYTES = 0
        context.set_spawning_popen(object())
        carried = spawn_tables.parcel(export_tables(sds.open({root!r})))
        context.set_spawning_popen(None)
        print(carried.path)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    written = done.stdout.strip().splitlines()[-1]
    assert written.startswith(FOLDER + os.sep)
    assert not os.path.exists(written)  # removed when its process exited
    assert not os.path.exists(orphan)  # removed by the process that wrote next
