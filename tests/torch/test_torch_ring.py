"""Worker batches in reused shared-memory blocks, through real DataLoader workers.

Every test checks values against signal_dataset's own reader, and the ones
that matter for reuse keep batches alive while the workers go on writing.
"""

from __future__ import annotations

from torch_required import torch

import functools
import gc
import multiprocessing
import os
import pickle
import signal
import warnings

import numpy as np
import pytest
import signal_dataset as sds
from sds_factory import capture, write_dataset
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from sds_loader.torch import Batch, SDSTorchDataset, collate
from sds_loader.torch import ring as torch_ring
from sds_loader.torch.ring import WorkerRing

RECORDS = 120
BATCH = 8


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("ring") / "captures"

    def make(ordinal: int) -> sds.Record:
        record = capture(ordinal, samples=96)
        return sds.Record(id=record.id, fields=record.fields, metadata={**record.metadata, "index": ordinal})

    write_dataset(path, RECORDS, make, records_per_shard=50)
    return str(path)


@functools.cache
def reference(root: str) -> tuple[np.ndarray, np.ndarray]:
    dataset = sds.open(root)
    records = [dataset[i] for i in range(len(dataset))]
    return (
        np.stack([r["samples"].data for r in records]),
        np.array([r.metadata["label"] for r in records]),
    )


def assert_batch_is_fresh(root: str, batch: dict[str, torch.Tensor]) -> None:
    samples, labels = reference(root)
    index = batch["index"].numpy()
    assert batch["inputs"].numpy().tobytes() == samples[index].tobytes()
    assert batch["target"].numpy().tolist() == labels[index].tolist()


def loader(root: str, **options) -> DataLoader:
    dataset = SDSTorchDataset(root, targets={"index": "index"})
    options.setdefault("num_workers", 2)
    options.setdefault("multiprocessing_context", "fork")
    return DataLoader(dataset, batch_size=BATCH, shuffle=True, collate_fn=collate, **options)


# Spawned workers start slowly (each imports torch), so spawn runs once, persistent.
@pytest.mark.parametrize(
    ("context", "persistent"),
    [("fork", False), ("fork", True), ("spawn", True)],
    ids=["fork-per-epoch", "fork-persistent", "spawn-persistent"],
)
def test_kept_batches_are_never_overwritten(root, context, persistent) -> None:
    epochs = loader(root, multiprocessing_context=context, persistent_workers=persistent)
    kept = []
    for _ in range(2):
        for batch in epochs:
            kept.append(batch)
            assert_batch_is_fresh(root, batch)
    # Read again after both epochs, while workers went on writing in between.
    for batch in kept:
        assert_batch_is_fresh(root, batch)
    assert sorted(i for b in kept for i in b["index"].tolist()) == sorted(list(range(RECORDS)) * 2)


def test_a_loop_that_lets_go_cycles_through_a_few_blocks(root) -> None:
    epochs = loader(root, persistent_workers=True)
    seen = 0
    for _ in range(3):
        for batch in epochs:
            assert_batch_is_fresh(root, batch)
            seen += 1
            mapped = torch_ring.mapped_blocks()
    assert seen == 3 * RECORDS // BATCH
    # Batches did go through ring blocks, and no more than the ring's size per worker.
    assert 0 < mapped <= 2 * torch_ring.DEFAULT_BLOCKS


def test_ring_grows_to_its_size_then_makes_one_off_blocks() -> None:
    ring = WorkerRing(blocks=2)
    held = []
    for _ in range(5):
        ring.start_batch()
        tensor, array = ring.new((4, 100), np.dtype(np.float32))
        array[:] = len(held)
        held.append((ring.finish_batch(), tensor))
    # First batch sizes the blocks; the next two fill the ring; two more go one-off.
    assert ring.blocks == 2 and ring.blocks_made == 2
    assert [block is not None for block, _ in held] == [False, True, True, False, False]
    assert ring.one_off_arrays == 3
    assert [int(t[0, 0]) for _, t in held] == [0, 1, 2, 3, 4]
    del held[1:3]
    gc.collect()
    ring.start_batch()
    ring.new((4, 100), np.dtype(np.float32))
    assert ring.finish_batch() is not None and ring.blocks_reused == 1


def test_custom_collate_that_copies_frees_the_block(root) -> None:
    def stack(batch):
        return torch.utils.data.default_collate(list(batch))

    epochs = DataLoader(
        SDSTorchDataset(root, targets={"index": "index"}),
        batch_size=BATCH,
        num_workers=1,
        collate_fn=stack,
        multiprocessing_context="fork",
    )
    for batch in epochs:
        assert_batch_is_fresh(root, batch)


def test_keys_added_by_a_wrapping_collate_cross_too(root) -> None:
    def tagged(batch):
        out = collate(batch)
        out["worker"] = torch.utils.data.get_worker_info().id
        out["doubled"] = out["target"] * 2
        return out

    epochs = DataLoader(
        SDSTorchDataset(root, targets={"index": "index"}),
        batch_size=BATCH,
        num_workers=2,
        collate_fn=tagged,
        multiprocessing_context="fork",
        persistent_workers=True,
    )
    for _ in range(2):
        for batch in epochs:
            assert_batch_is_fresh(root, batch)
            assert batch["worker"] in (0, 1)
            assert torch.equal(batch["doubled"], batch["target"] * 2)


def test_uncollated_batches_cross_too(root) -> None:
    def keep_batch(batch):
        return batch

    epochs = DataLoader(
        SDSTorchDataset(root, targets={"index": "index"}),
        batch_size=BATCH,
        shuffle=True,
        num_workers=2,
        collate_fn=keep_batch,
        multiprocessing_context="fork",
        persistent_workers=True,
        timeout=120,  # a batch that cannot be pickled is dropped by the worker: fail, not hang
    )
    kept = [batch for _ in range(2) for batch in epochs]
    assert all(isinstance(batch, Batch) and len(batch) == BATCH for batch in kept)
    for batch in kept:
        assert_batch_is_fresh(root, batch.tensors)


def test_pin_memory_on_this_machine(root) -> None:
    # With an accelerator, DataLoader's pin step copies each batch into page-locked
    # memory and drops ours, which hands the block back; without one (CPU-only
    # torch) torch warns and skips pinning, and batches arrive as they are.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        epochs = loader(root, pin_memory=True, persistent_workers=True)
        kept = [batch for _ in range(2) for batch in epochs]
    for batch in kept:
        assert_batch_is_fresh(root, batch)
        assert batch["inputs"].is_pinned() == torch.cuda.is_available()


def test_distributed_sampler_with_workers(root) -> None:
    dataset = SDSTorchDataset(root, targets={"index": "index"})
    served = []
    for rank in (0, 1):
        sampler = DistributedSampler(dataset, num_replicas=2, rank=rank, seed=3)
        epochs = DataLoader(
            dataset,
            batch_size=BATCH,
            sampler=sampler,
            num_workers=2,
            collate_fn=collate,
            multiprocessing_context="fork",
        )
        kept = list(epochs)
        for batch in kept:
            assert_batch_is_fresh(root, batch)
        served.append([i for b in kept for i in b["index"].tolist()])
    assert not set(served[0]) & set(served[1])
    assert sorted(served[0] + served[1]) == list(range(RECORDS))


# -- nothing left behind -------------------------------------------------------


def shm_entries(pids: set[int]) -> set[str]:
    """/dev/shm entries named by torch or Python for one of `pids`."""
    try:
        names = os.listdir("/dev/shm")
    except FileNotFoundError:
        return set()
    return {name for name in names if any(f"_{pid}_" in name or name.endswith(f"_{pid}") for pid in pids)}


def worker_pids() -> set[int]:
    return {child.pid for child in multiprocessing.active_children()}


class CrashingDataset(SDSTorchDataset):
    """Kills its own worker at one batch, as a segfault or the OOM killer would."""

    def __getitems__(self, indices):
        info = torch.utils.data.get_worker_info()
        if info is not None and min(indices) < BATCH:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().__getitems__(indices)


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_worker_crash_leaves_no_shared_memory(root, context) -> None:
    dataset = CrashingDataset(root, targets={"index": "index"})
    epochs = DataLoader(
        dataset,
        batch_size=BATCH,
        num_workers=2,
        collate_fn=collate,
        multiprocessing_context=context,
        persistent_workers=True,
    )
    pids: set[int] = set()
    kept = []
    with pytest.raises(RuntimeError, match="DataLoader worker"):
        iterator = iter(epochs)
        pids |= worker_pids()
        for batch in iterator:
            kept.append(batch)  # the sequential sampler reaches the fatal batch first
    pids |= worker_pids()
    del iterator, epochs
    gc.collect()
    assert pids and not shm_entries(pids | {os.getpid()})
    assert not any(p.pid in pids and p.is_alive() for p in multiprocessing.active_children())


@pytest.mark.parametrize("persistent", [False, True], ids=["per-epoch", "persistent"])
def test_leaving_a_loop_early_leaves_no_shared_memory(root, persistent) -> None:
    epochs = loader(root, persistent_workers=persistent)
    pids: set[int] = set()
    kept = []
    for _ in range(2):
        for count, batch in enumerate(epochs):
            pids |= worker_pids()
            kept.append(batch)
            if count == 4:
                break
    for batch in kept:
        assert_batch_is_fresh(root, batch)
    del epochs, batch
    gc.collect()
    assert pids and not shm_entries(pids | {os.getpid()})
    before = torch_ring.mapped_blocks()
    # The batches kept above live in the workers' blocks, mapped here.
    assert before > 0
    del kept
    gc.collect()
    # Once nothing is held and the workers are gone, their blocks are unmapped here too.
    assert torch_ring.mapped_blocks() < before
    assert not any(m.worker in pids for m in torch_ring._this_registry().blocks.values())


def test_ring_batches_do_not_unpickle_in_a_stranger(root) -> None:
    ring = WorkerRing(blocks=1)
    for _ in range(2):
        ring.start_batch()
        _, array = ring.new((3,), np.dtype(np.int64))
        array[:] = [1, 2, 3]
        block = ring.finish_batch()
    batch = torch_ring.RingBatch({"x": torch.from_numpy(array)}, block)
    block.header[torch_ring._MAPPED] = 1  # as if the main process had mapped it
    with pytest.raises(RuntimeError, match="never mapped"):
        pickle.loads(pickle.dumps(batch))
