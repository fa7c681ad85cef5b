"""ShardAwareSampler and the contract every sampler shares: order, mixing, partitions, resume."""

from __future__ import annotations

from torch_required import torch

import functools

import numpy as np
import pytest
import signal_dataset as sds
from sds_factory import capture, write_dataset
from torch.utils.data import DataLoader

from sds_loader.dataset import shard_table
from sds_loader.samplers import EpochSampler, ShardAwareSampler
from sds_loader.samplers.shard_aware import cut_runs
from sds_loader.torch import SDSTorchDataset, collate

#: Large enough for mixing statistics, small enough to write in a few seconds.
RECORDS = 4096
#: Not a multiple of the run length, so runs are cut short at every shard's end.
PER_SHARD = 1000
BATCH = 256


@pytest.fixture(scope="module")
def large(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("samplers") / "large"
    write_dataset(
        root, RECORDS, functools.partial(capture, channels=1, samples=2), records_per_shard=PER_SHARD
    )
    return str(root)


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("samplers") / "small"
    write_dataset(root, 100, functools.partial(capture, samples=16), records_per_shard=30)
    return str(root)


def shard_positions(root: str) -> tuple[np.ndarray, np.ndarray]:
    """(shard file number, record in that shard) of every ordinal, from signal_dataset."""
    dataset = sds.open(root)
    files, records = np.empty(len(dataset), np.int64), np.empty(len(dataset), np.int64)
    names: dict[str, int] = {}
    for instruction in dataset.read_instructions(0, len(dataset)):
        span = slice(instruction.first_ordinal, instruction.first_ordinal + instruction.take)
        files[span] = names.setdefault(instruction.filename, len(names))
        records[span] = np.arange(instruction.skip, instruction.skip + instruction.take)
    return files, records


# -- one epoch, one replica -----------------------------------------------------


@pytest.mark.parametrize("shuffle", [True, False])
def test_every_ordinal_exactly_once_per_epoch(large, shuffle) -> None:
    sampler = ShardAwareSampler(large, shuffle=shuffle, seed=3)
    assert len(sampler) == RECORDS
    for epoch in range(3):
        sampler.set_epoch(epoch)
        order = list(sampler)
        assert sorted(order) == list(range(RECORDS))
        assert all(type(i) is int for i in order[:5])
    if not shuffle:
        assert order == list(range(RECORDS))


def test_order_is_a_function_of_seed_and_epoch(large) -> None:
    first = ShardAwareSampler(large, seed=11)
    again = ShardAwareSampler(SDSTorchDataset(large), seed=11)
    orders = []
    for epoch in range(3):
        first.set_epoch(epoch)
        again.set_epoch(epoch)
        orders.append(list(first))
        assert list(again) == orders[-1]
        assert list(first) == orders[-1]  # iterating again repeats the epoch
    assert len({tuple(o) for o in orders}) == 3
    assert list(ShardAwareSampler(large, seed=12)) != orders[0]


def test_epoch_is_mixed_while_batches_read_few_places(large) -> None:
    files, records = shard_positions(large)
    for seed, epoch in [(0, 0), (0, 1), (7, 4)]:
        sampler = ShardAwareSampler(large, seed=seed)
        sampler.set_epoch(epoch)
        order = np.asarray(list(sampler))
        # Position and ordinal are both permutations of 0..n-1, so Pearson on them is Spearman.
        rank_correlation = np.corrcoef(np.arange(RECORDS), order)[0, 1]
        assert abs(rank_correlation) < 0.2, (seed, epoch, rank_correlation)
        for start in range(0, RECORDS - BATCH + 1, BATCH):
            batch = order[start : start + BATCH]
            assert len(np.unique(batch // 64)) >= 8
            # Locality: the batch is whole runs of 16, about runs_mixed of them,
            # give or take the short runs at shard ends and a run split by the batch edge.
            runs = np.unique(files[batch] * PER_SHARD + records[batch] // 16)
            assert len(runs) <= 16 + 4, (start, len(runs))


def test_small_batches_still_draw_from_many_runs(large) -> None:
    order = np.asarray(list(ShardAwareSampler(large, seed=1)))
    for start in range(0, 1024, 32):
        assert len(np.unique(order[start : start + 32] // 16)) >= 8


def test_runs_never_cross_a_shard_and_start_aligned(large) -> None:
    files, records = shard_positions(large)
    table = shard_table(sds.open(large))
    firsts = cut_runs(table.starts, table.skips[:-1], 16)
    assert len(firsts) - 1 == ShardAwareSampler(large).runs
    assert firsts[0] == 0 and firsts[-1] == RECORDS
    for first, stop in zip(firsts[:-1], firsts[1:], strict=True):
        assert 0 < stop - first <= 16
        assert len(set(files[first:stop])) == 1
        assert records[first] % 16 == 0 or records[first] == 0
    # A stretch stored from the middle of its shard aligns to the shard's numbering.
    offset = cut_runs(np.array([0, 40]), np.array([5]), 16)
    assert offset.tolist() == [0, 11, 27, 40]


def test_knobs_shape_the_runs(large) -> None:
    files, records = shard_positions(large)
    long_runs = np.asarray(list(ShardAwareSampler(large, run_length=64, runs_mixed=1, seed=2)))
    keys = files[long_runs] * PER_SHARD + records[long_runs] // 64
    # With nothing mixed, 64 positions hold one run of 64, or parts of two
    # (three around a shard's short last run).
    touched = [len(np.unique(keys[k : k + 64])) for k in range(0, RECORDS, 64)]
    assert max(touched) <= 3 and touched.count(1) >= 5
    with pytest.raises(ValueError, match="run_length must be a positive integer"):
        ShardAwareSampler(large, run_length=0)
    with pytest.raises(ValueError, match="runs_mixed must be a positive integer"):
        ShardAwareSampler(large, runs_mixed=True)


def test_wrapper_without_addressing_uses_ordinal_runs(large) -> None:
    subset = torch.utils.data.Subset(SDSTorchDataset(large), range(500))
    order = list(ShardAwareSampler(subset, seed=4))
    assert sorted(order) == list(range(500))
    with pytest.raises(TypeError, match="ShardAwareSampler needs"):
        ShardAwareSampler(object())


# -- partitions -----------------------------------------------------------------


@pytest.mark.parametrize("replicas", [2, 3, 7])
def test_partitions_like_distributed_sampler(small, replicas) -> None:
    ranks = [ShardAwareSampler(small, num_replicas=replicas, rank=r, seed=9) for r in range(replicas)]
    per_rank = -(-100 // replicas)
    orders = [list(s) for s in ranks]
    assert {len(s) for s in ranks} == {per_rank}
    assert [len(o) for o in orders] == [per_rank] * replicas
    everything = [i for o in orders for i in o]
    assert sorted(set(everything)) == list(range(100))
    assert len(everything) - 100 == per_rank * replicas - 100  # padding repeats, nothing lost
    dropped = [
        list(ShardAwareSampler(small, num_replicas=replicas, rank=r, seed=9, drop_last=True))
        for r in range(replicas)
    ]
    assert [len(o) for o in dropped] == [100 // replicas] * replicas
    flat = [i for o in dropped for i in o]
    assert len(set(flat)) == len(flat)


def test_bad_replica_arguments(small) -> None:
    with pytest.raises(ValueError, match="rank 2 is out of range for 2 replicas"):
        ShardAwareSampler(small, num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="num_replicas must be at least 1"):
        ShardAwareSampler(small, num_replicas=0, rank=0)
    with pytest.raises(TypeError, match="seed must be an integer"):
        ShardAwareSampler(small, seed=1.5)


# -- resume ---------------------------------------------------------------------


@pytest.mark.parametrize("stop", [0, 1, 37, 99, 100])
def test_state_dict_resumes_exactly(small, stop) -> None:
    sampler = ShardAwareSampler(small, seed=5, num_replicas=1, rank=0)
    sampler.set_epoch(2)
    full = list(sampler)
    iterator = iter(sampler)
    seen = [next(iterator) for _ in range(stop)]
    state = sampler.state_dict()
    restored = ShardAwareSampler(small)  # seed and epoch come from the state
    restored.load_state_dict(state)
    restored.set_epoch(2)  # the usual call at the top of a resumed loop keeps the position
    assert seen + list(restored) == full
    assert list(restored) == full  # the next pass starts the epoch afresh
    restored.load_state_dict(state)
    restored.set_epoch(3)  # another epoch: the saved position does not apply
    sampler.set_epoch(3)
    assert list(restored) == list(sampler)


def test_state_from_another_layout_is_refused(small, large) -> None:
    state = ShardAwareSampler(small, run_length=8).state_dict()
    with pytest.raises(ValueError, match="run_length: saved 8, now 16"):
        ShardAwareSampler(small).load_state_dict(state)
    with pytest.raises(ValueError, match="items: saved 100, now 4096"):
        ShardAwareSampler(large, run_length=8).load_state_dict(state)
    with pytest.raises(ValueError, match="needs a state from ShardAwareSampler.state_dict"):
        ShardAwareSampler(small).load_state_dict({"yielded": 3})


def loader_batches(loader, count=None) -> list[list[int]]:
    batches = []
    for batch in loader:
        batches.append(batch["index"].tolist())
        if count is not None and len(batches) == count:
            break
    return batches


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("samplers") / "indexed"

    def make(ordinal: int) -> sds.Record:
        record = capture(ordinal, channels=1, samples=4)
        return sds.Record(id=record.id, fields=record.fields, metadata={**record.metadata, "index": ordinal})

    write_dataset(root, 150, make, records_per_shard=40)
    return str(root)


def test_resume_through_a_plain_dataloader(indexed) -> None:
    dataset = SDSTorchDataset(indexed, targets={"index": "index"})
    sampler = ShardAwareSampler(dataset, seed=8, run_length=4, runs_mixed=2)
    sampler.set_epoch(1)
    loader = DataLoader(dataset, batch_size=8, sampler=sampler, collate_fn=collate)
    full = loader_batches(loader)
    head = loader_batches(loader, 5)
    state = sampler.state_dict()  # no workers: the sampler is exactly 5 batches in
    resumed = ShardAwareSampler(dataset, run_length=4, runs_mixed=2)
    resumed.load_state_dict(state)
    rest = loader_batches(DataLoader(dataset, batch_size=8, sampler=resumed, collate_fn=collate))
    assert head + rest == full


def test_resume_through_stateful_dataloader_with_workers(indexed) -> None:
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    dataset = SDSTorchDataset(indexed, targets={"index": "index"})

    def make_loader() -> object:
        sampler = ShardAwareSampler(dataset, seed=8, run_length=4, runs_mixed=2)
        sampler.set_epoch(1)
        return stateful.StatefulDataLoader(
            dataset, batch_size=8, sampler=sampler, collate_fn=collate, num_workers=2
        )

    full = loader_batches(make_loader())
    interrupted = make_loader()
    head = loader_batches(interrupted, 7)  # workers have read ahead of this by now
    state = interrupted.state_dict()
    del interrupted
    resumed = make_loader()
    resumed.load_state_dict(state)
    rest = loader_batches(resumed)
    assert head + rest == full
    assert sorted(i for b in full for i in b) == list(range(150))


# -- the contract as a base -----------------------------------------------------


class _Blocks(EpochSampler[list[int]]):
    """A batch sampler on the shared contract: fixed blocks of 5 ordinals, shuffled."""

    def _item_count(self) -> int:
        return 9

    def _epoch_items(self, rng):
        blocks = [list(range(5 * k, 5 * k + 5)) for k in range(9)]
        if rng is not None:
            blocks = [blocks[k] for k in rng.permutation(9)]
        return blocks


def test_contract_serves_batch_samplers_too() -> None:
    ranks = [_Blocks(num_replicas=2, rank=r, seed=1) for r in range(2)]
    orders = [list(s) for s in ranks]
    assert [len(o) for o in orders] == [5, 5]
    assert sorted({tuple(b) for o in orders for b in o}) == [tuple(range(5 * k, 5 * k + 5)) for k in range(9)]
    sampler = _Blocks(seed=1)
    iterator = iter(sampler)
    next(iterator), next(iterator)
    resumed = _Blocks()
    resumed.load_state_dict(sampler.state_dict())
    assert list(resumed) == list(_Blocks(seed=1))[2:]
