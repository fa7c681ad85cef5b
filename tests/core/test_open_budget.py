"""The shards a reader keeps open under `max_open_files` are the ones it read last.

The reader closes the least recently read shard when one more would pass the
budget, and a shard read again counts as read last. Which shards are open is
asked of the process itself (its descriptors in /proc/self/fd), and every
batch is compared with signal_dataset's reader, byte for byte.
"""

from __future__ import annotations

import os
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest
from native_required import _native  # noqa: F401 - a build without it fails the run (conftest.py)
from sds_factory import assert_matches_reference, write_dataset

import sds_loader

SHARDS = 5
PER_SHARD = 4
FIELDS = ("samples",)

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("open-budget") / "ds"
    write_dataset(path, SHARDS * PER_SHARD, records_per_shard=PER_SHARD)
    return str(path)


def open_shards(paths: list[str]) -> set[int]:
    """Which of `paths` this process holds a descriptor of."""
    held = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            held.add(os.readlink(f"/proc/self/fd/{name}"))
        except OSError:  # the listing's own descriptor, closed by now
            continue
    return {number for number, path in enumerate(paths) if os.path.realpath(path) in held}


def first_record_of_each_shard(reader: sds_loader.BatchReader) -> dict[int, int]:
    table = reader.shard_table()
    assert table is not None
    files, _ = table.locate(np.arange(len(reader), dtype=np.int64))
    first: dict[int, int] = {}
    for ordinal, file in enumerate(files.tolist()):
        first.setdefault(int(file), ordinal)
    assert len(first) == SHARDS, first
    return first


@pytest.mark.parametrize("budget", [2, 3])
def test_the_least_recently_read_shard_is_closed_first(root: str, budget: int) -> None:
    # Closed whatever the outcome, so that no later test sees this one's descriptors.
    with closing(sds_loader.BatchReader(root, fields=FIELDS, threads=1, max_open_files=budget)) as reader:
        least_recent_first(root, reader, budget)


def least_recent_first(root: str, reader: sds_loader.BatchReader, budget: int) -> None:
    table = reader.shard_table()
    assert table is not None
    paths = [str(Path(path)) for path in table.paths]
    record = first_record_of_each_shard(reader)
    # Read shards 0 .. budget-1, then 0 again (it becomes the most recent),
    # then one more: the shard read longest ago, 1, is the one closed.
    order = [*range(budget), 0, budget]
    for shard in order:
        batch = reader.read([record[shard]])
        assert_matches_reference(root, batch, [record[shard]], FIELDS)
    expected = {0, *range(2, budget + 1)}
    assert open_shards(paths) == expected, (open_shards(paths), expected)
    # And the closed shard reads again, byte for byte, closing the next oldest.
    batch = reader.read([record[1]])
    assert_matches_reference(root, batch, [record[1]], FIELDS)
    assert len(open_shards(paths)) == budget
    assert 1 in open_shards(paths)


def test_a_budget_over_the_shard_count_keeps_every_shard_open(root: str) -> None:
    with closing(
        sds_loader.BatchReader(root, fields=FIELDS, threads=1, max_open_files=SHARDS + 10)
    ) as reader:
        paths = every_shard_stays_open(root, reader)
    assert open_shards(paths) == set()


def every_shard_stays_open(root: str, reader: sds_loader.BatchReader) -> list[str]:
    table = reader.shard_table()
    assert table is not None
    paths = [str(Path(path)) for path in table.paths]
    record = first_record_of_each_shard(reader)
    for _ in range(2):
        for shard in reversed(range(SHARDS)):
            assert_matches_reference(root, reader.read([record[shard]]), [record[shard]], FIELDS)
    assert open_shards(paths) == set(range(SHARDS))
    return paths
