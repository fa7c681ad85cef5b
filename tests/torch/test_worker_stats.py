"""`SDSTorchDataset.stats()`: the main process's reads and every DataLoader worker's, summed.

Real DataLoaders with real worker processes, forked and spawned, persistent
and not: the records they read over each epoch are counted exactly once, the
stage times come along, and `iteration` starts again at each `set_epoch`.
"""

from __future__ import annotations

from torch_required import torch  # noqa: F401 - skips this module without torch

import pickle

import pytest
from native_required import _native  # noqa: F401
from sds_factory import write_dataset
from torch.utils.data import DataLoader

from sds_loader import ReadStats
from sds_loader.torch import DatasetStats, SDSTorchDataset, collate
from sds_loader.torch.worker_stats import WorkerStatsBoard

RECORDS = 24
BATCH = 4


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = tmp_path_factory.mktemp("worker-stats") / "ds"
    write_dataset(path, RECORDS, records_per_shard=8)
    return str(path)


def epoch(loader: DataLoader) -> int:
    return sum(int(batch["inputs"].shape[0]) for batch in loader)


def records(stats: ReadStats) -> int:
    return stats.native_records + stats.fallback_records


@pytest.mark.parametrize("persistent", [False, True])
def test_two_forked_workers_count_each_epoch_exactly(root, persistent):
    dataset = SDSTorchDataset(root)
    loader = DataLoader(
        dataset,
        batch_size=BATCH,
        shuffle=True,
        num_workers=2,
        collate_fn=collate,
        persistent_workers=persistent,
        multiprocessing_context="fork",
    )
    before = dataset.stats()
    assert isinstance(before, DatasetStats)
    for number in range(2):
        dataset.set_epoch(number)
        assert records(dataset.stats().iteration) == 0
        assert epoch(loader) == RECORDS
        stats = dataset.stats()
        assert records(stats.iteration) == RECORDS
        assert stats.iteration.batches == RECORDS // BATCH
        # The main process read nothing meanwhile: all of it was the workers'.
        assert records(stats.workers) - records(before.workers) == RECORDS * (number + 1)
        assert records(stats.total) - records(before.total) == RECORDS * (number + 1)
    seconds = stats.iteration.stage_seconds
    assert seconds["decompress"] > 0 and seconds["python"] > 0, seconds


def test_spawned_persistent_workers_are_summed_too(root):
    dataset = SDSTorchDataset(root)
    loader = DataLoader(
        dataset,
        batch_size=BATCH,
        num_workers=2,
        collate_fn=collate,
        persistent_workers=True,
        multiprocessing_context="spawn",
    )
    start = dataset.stats().total
    assert epoch(loader) == RECORDS
    assert epoch(loader) == RECORDS
    spent = dataset.stats().total - start
    assert records(spent) == 2 * RECORDS
    assert spent.stage_seconds["decompress"] > 0


def test_the_main_process_reads_are_in_the_total(root):
    dataset = SDSTorchDataset(root)
    start = dataset.stats()
    assert epoch(DataLoader(dataset, batch_size=BATCH, collate_fn=collate)) == RECORDS
    stats = dataset.stats()
    assert records(stats.total - start.total) == RECORDS
    assert records(stats.workers) == 0
    assert stats.total.native_records == dataset.reader.stats.native_records


def test_a_board_pickled_elsewhere_is_a_fresh_one(root):
    board = WorkerStatsBoard()
    board.claim(0, ReadStats())
    stats = ReadStats(native_records=5)
    board.publish(stats)
    assert board.total().native_records == 5
    copy = pickle.loads(pickle.dumps(board))  # not a worker being started
    assert copy.total().native_records == 0
