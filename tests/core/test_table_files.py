"""With a node cache, a node's ranks tabulate a snapshot once: the first writes its table, the rest load it.

Each process a rank starts (not forked, not spawned by the first) opens the
dataset with the same `cache_dir`; the table file is used only for the
snapshot it names and only if it is whole, and a damaged one is replaced.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import signal_dataset as sds
from sds_factory import write_dataset

from sds_loader import BatchReader, table_files
from sds_loader import dataset as addressing


@pytest.fixture
def root(tmp_path: Path) -> str:
    path = tmp_path / "ds"
    write_dataset(path, 30, records_per_shard=3, shards_per_manifest=4)
    return str(path)


def own(root: str) -> table_files.Origin:
    """What the data shards' table of the local dataset at `root` may name."""
    return table_files.Origin(root=root, kind="data", table_root=root)


def forget_tables() -> None:
    with addressing._TABLES_LOCK:
        addressing._TABLES.clear()


def rows(batch: dict[str, np.ndarray]) -> list[bytes]:
    return [row.tobytes() for row in batch["samples"]]


def expected(root: str, indices: list[int]) -> list[bytes]:
    dataset = sds.open(root)
    return [dataset[i]["samples"].data.tobytes() for i in indices]


def test_another_process_of_the_node_loads_the_table_the_first_wrote(root: str, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    forget_tables()
    BatchReader(root, fields=("samples",), cache_dir=cache).read([0])
    key = addressing.identity(sds.open(root))
    assert Path(table_files.path_for(str(cache), key)).is_file()
    program = textwrap.dedent(
        f"""
        from sds_loader import BatchReader, dataset as addressing

        def built_again(*args, **kwargs):
            raise AssertionError("this rank read the manifests again")

        addressing._build = built_again
        batch = BatchReader({root!r}, fields=("samples",), cache_dir={str(cache)!r}).read([29, 0, 14])
        print(batch["samples"].tobytes().hex())
        """
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert bytes.fromhex(done.stdout.strip()) == b"".join(expected(root, [29, 0, 14]))


def test_a_damaged_table_file_is_ignored_and_replaced(root: str, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    forget_tables()
    BatchReader(root, fields=("samples",), cache_dir=cache)
    path = Path(table_files.path_for(str(cache), addressing.identity(sds.open(root))))
    payload = bytearray(path.read_bytes())
    payload[len(payload) // 2] ^= 0xFF
    path.write_bytes(bytes(payload))
    forget_tables()
    assert table_files.load(str(cache), addressing.identity(sds.open(root)), 30, own(root)) is None
    batch = BatchReader(root, fields=("samples",), cache_dir=cache).read([7, 3])
    assert rows(batch) == expected(root, [7, 3])
    assert table_files.load(str(cache), addressing.identity(sds.open(root)), 30, own(root)) is not None


def test_a_table_file_of_another_snapshot_is_not_used(root: str, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    other = tmp_path / "other"
    write_dataset(other, 12, records_per_shard=4)
    forget_tables()
    BatchReader(str(other), fields=("samples",), cache_dir=cache)
    # The other dataset's file put where this one's would be: it names another identity.
    mine = Path(table_files.path_for(str(cache), addressing.identity(sds.open(root))))
    theirs = Path(table_files.path_for(str(cache), addressing.identity(sds.open(str(other)))))
    mine.write_bytes(theirs.read_bytes())
    assert table_files.load(str(cache), addressing.identity(sds.open(root)), 30, own(root)) is None
    forget_tables()
    assert rows(BatchReader(root, fields=("samples",), cache_dir=cache).read([29])) == expected(root, [29])
