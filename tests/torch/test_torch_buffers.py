"""Where batches are written: pooled page-aligned blocks, shared memory, pinned memory."""

from __future__ import annotations

from torch_required import torch

import gc
import pickle
import threading

import numpy as np
import pytest
from sds_factory import write_dataset
from torch.utils.data import DataLoader

from sds_loader.schema import SAFETENSORS_TO_NUMPY
from sds_loader.torch import SDSTorchDataset, collate
from sds_loader.torch import buffers as torch_buffers
from sds_loader.torch.buffers import (
    PAGE_SIZE,
    PagePool,
    SharedMemorySource,
    torch_dtype,
)
from sds_loader.torch.ring import RingBatch

RECORDS = 24


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("torch-buffers") / "captures"
    write_dataset(path, RECORDS, records_per_shard=10)
    return str(path)


def expected(root: str, indices: list[int]) -> dict[str, torch.Tensor]:
    import signal_dataset as sds

    reference = sds.open(root)
    return {
        "inputs": torch.stack([torch.from_numpy(reference[i]["samples"].data.copy()) for i in indices]),
        "target": torch.tensor([reference[i].metadata["label"] for i in indices], dtype=torch.long),
    }


def assert_equal_batches(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> None:
    assert list(got) == list(want)
    for key in want:
        assert got[key].dtype == want[key].dtype and torch.equal(got[key], want[key]), key


def pointers(batch: dict[str, torch.Tensor]) -> set[int]:
    return {tensor.data_ptr() for tensor in batch.values()}


# -- the main-process pool ------------------------------------------------------


def test_main_process_batches_are_page_aligned_pool_blocks(root: str) -> None:
    dataset = SDSTorchDataset(root)
    assert dataset.buffers == "pool"
    batch = collate(dataset.__getitems__([3, 1, 4, 1, 5]))
    for tensor in batch.values():
        assert tensor.data_ptr() % PAGE_SIZE == 0
        assert tensor.is_contiguous()
    assert_equal_batches(batch, expected(root, [3, 1, 4, 1, 5]))


def test_block_is_reused_only_after_the_batch_is_gone(root: str) -> None:
    dataset = SDSTorchDataset(root)
    pool = dataset._open().source
    first = collate(dataset.__getitems__([0, 1, 2, 3]))
    first_pointers = pointers(first)
    second = collate(dataset.__getitems__([4, 5, 6, 7]))
    assert not pointers(second) & first_pointers  # first is still held
    del first
    gc.collect()
    reused_before = pool.blocks_reused
    third = collate(dataset.__getitems__([8, 9, 10, 11]))
    assert pointers(third) == first_pointers
    assert pool.blocks_reused == reused_before + 2
    assert_equal_batches(second, expected(root, [4, 5, 6, 7]))
    assert_equal_batches(third, expected(root, [8, 9, 10, 11]))


@pytest.mark.parametrize("keep", ["row view", "numpy view", "storage", "sample dict"])
def test_anything_made_from_a_batch_keeps_its_block(root: str, keep: str) -> None:
    dataset = SDSTorchDataset(root)
    batch = dataset.__getitems__([0, 1, 2, 3])
    inputs = batch.tensors["inputs"]
    kept: object = {
        "row view": inputs[2],
        "numpy view": inputs.numpy()[1:],
        "storage": inputs.untyped_storage(),
        "sample dict": batch[3],
    }[keep]
    pointer = inputs.data_ptr()
    snapshot = inputs.clone()
    del batch, inputs
    gc.collect()
    for _ in range(3):
        other = collate(dataset.__getitems__([20, 21, 22, 23]))
        assert other["inputs"].data_ptr() != pointer
    # The kept memory was never written over.
    if keep == "row view":
        assert torch.equal(kept, snapshot[2])
    elif keep == "numpy view":
        assert np.array_equal(kept, snapshot.numpy()[1:])
    elif keep == "sample dict":
        assert torch.equal(kept["inputs"], snapshot[3])
    else:
        assert kept.data_ptr() == pointer


def test_held_batches_are_never_overwritten(root: str) -> None:
    dataset = SDSTorchDataset(root)
    batches = list(DataLoader(dataset, batch_size=5, collate_fn=collate))
    assert len(batches) == 5
    assert len(set().union(*(pointers(b) for b in batches))) == 10
    for number, batch in enumerate(batches):
        indices = list(range(number * 5, min(number * 5 + 5, RECORDS)))
        assert_equal_batches(batch, expected(root, indices))


def test_a_training_loop_cycles_through_a_few_blocks(root: str) -> None:
    dataset = SDSTorchDataset(root)
    pool = dataset._open().source
    loader = DataLoader(
        dataset, batch_size=4, collate_fn=collate, shuffle=True, generator=torch.Generator().manual_seed(0)
    )
    seen = 0
    for _epoch in range(4):
        for batch in loader:  # the loop variable holds one batch while the next is read
            seen += int(batch["target"].shape[0])
    assert seen == 4 * RECORDS
    # Two arrays per batch, two batches alive at once: four blocks serve 24 batches.
    assert pool.blocks_made <= 4
    assert pool.blocks_reused == 2 * 24 - pool.blocks_made


def test_blocks_come_back_from_other_threads() -> None:
    pool = PagePool()
    tensor, array = pool.new((1000,), np.dtype(np.float32))
    del array
    done = threading.Event()

    def drop(holder: list) -> None:
        holder.clear()
        done.set()

    holder = [tensor]
    del tensor
    threading.Thread(target=drop, args=(holder,)).start()
    done.wait(5)
    gc.collect()
    assert pool.free_blocks == 1
    again, _ = pool.new((1000,), np.dtype(np.float32))
    assert pool.blocks_reused == 1 and pool.blocks_made == 1
    assert again.data_ptr() % PAGE_SIZE == 0


def test_pool_keeps_a_bounded_number_of_idle_blocks() -> None:
    pool = PagePool(max_free=3)
    made = [pool.new((n * 1024,), np.dtype(np.uint8))[0] for n in range(1, 7)]
    del made
    gc.collect()
    assert pool.free_blocks == 3
    # A pool copied to another process starts empty.
    assert pickle.loads(pickle.dumps(pool)).free_blocks == 0


def test_zero_byte_arrays_need_no_block() -> None:
    pool = PagePool()
    tensor, array = pool.new((4, 0), np.dtype(np.complex64))
    assert tensor.shape == (4, 0) and array.shape == (4, 0)
    assert pool.blocks_made == 0


# -- shared memory (DataLoader workers) ----------------------------------------


@pytest.mark.parametrize("name", sorted(SAFETENSORS_TO_NUMPY))
def test_shared_memory_tensors_for_every_dtype(name: str) -> None:
    dtype = SAFETENSORS_TO_NUMPY[name]
    tensor, array = SharedMemorySource().new((3, 5), dtype)
    assert tensor.is_shared()
    assert tensor.dtype == torch_dtype(dtype) == torch.from_numpy(np.zeros(1, dtype)).dtype
    assert tensor.shape == (3, 5) and array.shape == (3, 5) and array.dtype == dtype
    array[...] = np.arange(15).reshape(3, 5).astype(dtype)
    assert np.array_equal(tensor.numpy(), array)
    assert tensor.data_ptr() == array.ctypes.data


def test_worker_batches_cross_by_block_and_offset(root: str, monkeypatch) -> None:
    from multiprocessing.reduction import ForkingPickler

    import torch.multiprocessing  # noqa: F401  (registers torch's reducers, as in a worker)

    dataset = SDSTorchDataset(root)
    monkeypatch.setattr("sds_loader.torch.dataset._get_worker_info", lambda: object())
    monkeypatch.setattr(dataset._open(), "pid", -1)  # as a freshly forked worker sees it
    assert dataset.buffers == "ring"
    assert dataset.reader.threads == 1
    # The first batch sizes the ring's blocks; it crosses the usual way, by handle.
    first = collate(dataset.__getitems__([2, 7, 9]))
    assert type(first) is dict and all(t.is_shared() for t in first.values())
    assert_equal_batches(first, expected(root, [2, 7, 9]))
    ring = dataset._open().source
    for indices in ([1, 4, 5], [3, 0, 8]):
        batch = collate(dataset.__getitems__(indices))
        assert isinstance(batch, RingBatch)
        received = pickle.loads(ForkingPickler.dumps(batch))
        del batch
        assert type(received) is dict
        assert_equal_batches(received, expected(root, indices))
        del received
        gc.collect()
    # Released on the receiving side, the one block was used again.
    assert (ring.blocks_made, ring.blocks_reused, ring.one_off_arrays) == (1, 1, 2)


# -- pinned memory (main process, pin_memory=True, CUDA present) ---------------


def test_pin_memory_without_an_accelerator_uses_the_pool(root: str) -> None:
    if torch.cuda.is_available():
        pytest.skip("an accelerator is present")
    assert SDSTorchDataset(root, pin_memory=True).buffers == "pool"


def test_pin_memory_allocates_every_array_pinned(root: str, monkeypatch) -> None:
    made: list[torch.Tensor] = []

    def fake_pinned_empty(shape, dtype):
        tensor = torch.empty(shape, dtype=dtype)
        made.append(tensor)
        return tensor

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch_buffers, "_pinned_empty", fake_pinned_empty)
    dataset = SDSTorchDataset(root, pin_memory=True)
    assert dataset.buffers == "pinned"
    made.clear()
    batch = collate(dataset.__getitems__([1, 0, 23]))
    # The reader wrote straight into the pinned allocations, and they are what is returned.
    assert [id(t) for t in batch.values()] == [id(t) for t in made]
    assert_equal_batches(batch, expected(root, [1, 0, 23]))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA for page-locked memory")
def test_pinned_batches_leave_the_pin_step_nothing_to_copy(root: str) -> None:
    dataset = SDSTorchDataset(root, pin_memory=True)
    batch = collate(dataset.__getitems__([0, 1, 2]))
    for tensor in batch.values():
        assert tensor.is_pinned()
        assert tensor.pin_memory().data_ptr() == tensor.data_ptr()
    loader = DataLoader(dataset, batch_size=8, pin_memory=True, collate_fn=collate)
    for number, got in enumerate(loader):
        assert all(t.is_pinned() for t in got.values())
        assert_equal_batches(got, expected(root, list(range(number * 8, number * 8 + 8))))


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_a_forked_child_cannot_write_into_the_parents_blocks() -> None:
    import os

    pool = PagePool()
    tensor, array = pool.new((4096,), np.dtype(np.uint8))
    array[:] = 7
    pid = os.fork()
    if pid == 0:  # child: scribble over the inherited block, then leave at once
        array[:] = 9
        os._exit(0 if int(array[0]) == 9 else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert int(tensor.min()) == int(tensor.max()) == 7
