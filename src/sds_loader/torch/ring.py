"""A DataLoader worker's batches in a ring of shared-memory blocks, mapped once, reused.

Without it, every batch a worker makes is a fresh shared-memory block: the
worker creates and maps it and faults in (zero-fills) every page as it
writes, and the main process receives its file descriptor through a round
trip to the worker and maps it again. For a 16 MB batch that is about 10 ms
of work per batch that has nothing to do with reading records.

`WorkerRing` keeps a few blocks per worker instead. A block is sent to the
main process whole (its descriptor) the first time only; the main process
keeps its mapping in a registry, and later batches in the same block cross
as a few numbers (block token, offsets, shapes). Nothing is copied either way.

A block is reused only when both sides are done with it:

- the worker's own arrays over it are gone (the batch was sent, or a
  collate_fn other than `sds_loader.torch.collate` copied it and dropped it);
- the main process has dropped every tensor made from it. Each block starts
  with a small header in the shared memory itself; the worker writes a lend
  number into it when it sends a batch, and the main process clears it from
  a finalizer that fires when the last tensor, view or numpy array of that
  batch dies, in whichever thread drops it (the pin-memory thread, say).

When no ring block is free (the user keeps batches) or the ring is full, a
batch goes into a one-off block that torch sends the ordinary way and that
is freed with the batch, so a worker never waits for the user and never
holds more than `blocks` ring blocks of one batch's size. The main process
keeps the mappings of a worker's blocks while that worker lives; once the
worker is gone they are dropped as soon as nothing of theirs is held, the
next time any ring batch arrives or a held one is released.

Blocks are created by torch's file-descriptor sharing, which unlinks the
shared-memory name at once: a crash leaves no /dev/shm entry behind.
"""

from __future__ import annotations

import os
import secrets
import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch as _torch

from sds_loader.torch.buffers import PAGE_SIZE, BufferSource, SharedMemorySource
from sds_loader.torch.worker_processes import alive

#: The header occupies the block's first page, so batch data starts page-aligned.
HEADER_BYTES = PAGE_SIZE
#: Header slots (int64): a random token naming the block; the lend number of
#: the batch the main process holds, 0 when none; 1 once the main process maps it.
_TOKEN, _LENT, _MAPPED = 0, 1, 2
#: Field offsets inside a block are multiples of this (any dtype's alignment).
_ALIGN = 64

#: Ring blocks per worker by default: the DataLoader's default prefetch of 2
#: batches in flight, one the training step holds, one in the pin-memory step.
DEFAULT_BLOCKS = 4


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


class _Block:
    """One ring block as the worker sees it."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        # (torch's stubs leave _new_shared untyped and know set_ only without a size or with a stride.)
        self.storage = _torch.UntypedStorage._new_shared(HEADER_BYTES + capacity)  # type: ignore[no-untyped-call]
        whole = _torch.empty(0, dtype=_torch.uint8).set_(self.storage, 0, (HEADER_BYTES + capacity,)).numpy()  # type: ignore[call-overload]
        self.header = whole[:HEADER_BYTES].view(np.int64)
        self.data = whole[HEADER_BYTES:]
        self.base = self.data.ctypes.data
        self.header[_TOKEN] = int.from_bytes(secrets.token_bytes(8), "little") >> 1
        self.header[_LENT] = 0
        self.header[_MAPPED] = 0
        #: Weak references to the worker's arrays over the current batch.
        self.local: list[weakref.ref[np.ndarray]] = []
        self.lends = 0

    @property
    def token(self) -> int:
        return int(self.header[_TOKEN])

    def idle(self) -> bool:
        return self.header[_LENT] == 0 and all(ref() is None for ref in self.local)

    def place(self, tensor: _torch.Tensor) -> tuple[int, tuple[int, ...], str] | None:
        """(offset, shape, dtype) of a contiguous tensor lying in this block, else None."""
        if not isinstance(tensor, _torch.Tensor) or tensor.device.type != "cpu" or not tensor.is_contiguous():
            return None
        offset = tensor.data_ptr() - self.base
        if offset < 0 or offset + tensor.numel() * tensor.element_size() > self.capacity:
            return None
        return offset, tuple(tensor.shape), str(tensor.dtype).removeprefix("torch.")


class WorkerRing(BufferSource):
    """Batches of one DataLoader worker, in a ring of reusable shared-memory blocks.

    Used by `SDSTorchDataset` inside workers; `sds_loader.torch.collate`
    returns a `RingBatch` that crosses to the main process by block and offset.
    """

    kind = "ring"

    def __init__(self, blocks: int = DEFAULT_BLOCKS) -> None:
        if blocks < 0:
            raise ValueError(f"a worker ring holds zero or more blocks, not {blocks}")
        _this_registry()  # a forked worker lets go of its parent's mappings
        self._max_blocks = blocks
        self._blocks: list[_Block] = []
        self._one_off = SharedMemorySource()
        #: Bytes of the largest batch so far; blocks are made this size.
        self._capacity = 0
        self._current: _Block | None = None
        self._used = 0
        self._needed = 0
        #: Blocks made, batches placed in a reused block, and arrays that went
        #: to one-off blocks because no ring block was free or large enough.
        self.blocks_made = 0
        self.blocks_reused = 0
        self.one_off_arrays = 0

    @property
    def blocks(self) -> int:
        return len(self._blocks)

    def start_batch(self) -> None:
        self._used = self._needed = 0
        self._current = None
        if self._capacity == 0 or self._max_blocks == 0:
            return  # the first batch teaches the ring how large blocks must be
        for block in self._blocks:
            if block.idle():
                if block.capacity >= self._capacity:
                    self._current = block
                    self.blocks_reused += 1
                    break
                self._blocks.remove(block)  # batches grew; make a larger one below
                break
        if self._current is None and len(self._blocks) < self._max_blocks:
            self._current = _Block(self._capacity)
            self._blocks.append(self._current)
            self.blocks_made += 1
        if self._current is not None:
            self._current.local = []

    def new(self, shape: tuple[int, ...], dtype: np.dtype) -> tuple[_torch.Tensor, np.ndarray]:
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        span = _round_up(nbytes, _ALIGN)
        self._needed += span  # what a block must hold for the whole batch, wherever this goes
        offset = self._used
        block = self._current
        if nbytes == 0 or block is None or offset + nbytes > block.capacity:
            if nbytes:
                self.one_off_arrays += 1
            return self._one_off.new(shape, dtype)
        self._used += span
        array = np.ndarray(shape, dtype=dtype, buffer=block.data, offset=offset)
        block.local.append(weakref.ref(array))
        return _torch.from_numpy(array), array

    def finish_batch(self) -> _Block | None:
        """The block this batch went into, if any; grows future blocks to the batch's size."""
        self._capacity = max(self._capacity, _round_up(self._needed, PAGE_SIZE))
        block, self._current = self._current, None
        return block if block is not None and block.local else None

    def __getstate__(self) -> dict[str, object]:
        return {"blocks": self._max_blocks}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(int(state["blocks"]))  # type: ignore[misc]


class RingBatch(dict[str, Any]):
    """A collated batch whose tensors lie in a ring block; pickles as the block and offsets.

    In the process that made it, it is the plain dict of tensors that
    `collate` returns. Pickled (by the DataLoader's result queue), each tensor
    still lying in the block becomes (offset, shape, dtype), and anything else
    (a key a custom collate_fn added, a tensor it replaced) pickles as usual.
    The main process gets a plain dict back.
    """

    __slots__ = ("_block",)

    def __init__(self, tensors: Mapping[str, _torch.Tensor], block: _Block) -> None:
        super().__init__(tensors)
        self._block = block

    def __reduce__(self) -> tuple[Any, ...]:
        block = self._block
        items = {}
        for key, value in self.items():
            place = block.place(value)
            items[key] = ("ring", place) if place is not None else ("value", value)
        if not any(kind == "ring" for kind, _ in items.values()):
            return dict, (dict(self),)
        block.lends += 1
        lend = block.lends
        block.header[_LENT] = lend
        # The descriptor goes only until the main process says it has mapped the block.
        storage = None if block.header[_MAPPED] else block.storage
        return _receive, (os.getpid(), block.token, lend, storage, block.capacity, items)


# -- the main process's side -------------------------------------------------


class _Mapped:
    """The main process's mapping of one worker's block."""

    __slots__ = ("worker", "storage", "header", "data", "held")

    def __init__(self, worker: int, storage: _torch.UntypedStorage, capacity: int) -> None:
        whole = _torch.empty(0, dtype=_torch.uint8).set_(storage, 0, (HEADER_BYTES + capacity,)).numpy()  # type: ignore[call-overload]
        self.worker = worker
        self.storage = storage
        self.header = whole[:HEADER_BYTES].view(np.int64)
        self.data = whole[HEADER_BYTES:]
        #: Whether a batch made from this block is alive here.
        self.held = False


class _Registry:
    """Blocks mapped in this process, by token; one registry per process."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.blocks: dict[int, _Mapped] = {}


_registry: _Registry | None = None


def _this_registry() -> _Registry:
    global _registry
    # A forked child inherits its parent's registry object; it starts its own.
    if _registry is None or _registry.pid != os.getpid():
        _registry = _Registry()
    return _registry


def mapped_blocks() -> int:
    """How many workers' blocks this process holds mapped (for tests and diagnostics)."""
    return len(_this_registry().blocks)


def _forget_dead_workers(registry: _Registry) -> None:
    for token, mapped in list(registry.blocks.items()):
        if not mapped.held and not alive(mapped.worker):
            registry.blocks.pop(token, None)


def _receive(
    worker: int,
    token: int,
    lend: int,
    storage: _torch.UntypedStorage | None,
    capacity: int,
    items: Mapping[str, tuple[str, Any]],
) -> dict[str, Any]:
    registry = _this_registry()
    mapped = registry.blocks.get(token)
    if mapped is None:
        if storage is None:
            raise RuntimeError(
                "a DataLoader worker sent a batch in a shared-memory block this process never "
                "mapped; was the batch unpickled in another process than the DataLoader's?"
            )
        _forget_dead_workers(registry)
        mapped = _Mapped(worker, storage, capacity)
        registry.blocks[token] = mapped
        mapped.header[_MAPPED] = 1
    batch: dict[str, Any] = {}
    refs: list[weakref.ref[np.ndarray]] = []
    pending = [lend]
    for key, (kind, value) in items.items():
        if kind != "ring":
            batch[key] = value
            continue
        offset, shape, dtype = value
        array = np.ndarray(shape, dtype=np.dtype(dtype), buffer=mapped.data, offset=offset)
        refs.append(weakref.ref(array))
        finalizer = weakref.finalize(array, _release, token, refs, pending, os.getpid())
        finalizer.atexit = False
        batch[key] = _torch.from_numpy(array)
    mapped.held = True
    return batch


def _release(token: int, refs: list[weakref.ref[np.ndarray]], pending: list[int], owner: int) -> None:
    """Finalizer of each array of a received batch; the last one alive hands the block back."""
    if os.getpid() != owner or any(ref() is not None for ref in refs):
        return  # an inherited copy in a forked child, or other arrays of the batch live on
    try:
        lend = pending.pop()  # atomic: exactly one finalizer of the batch gets past here
    except IndexError:
        return
    registry = _this_registry()
    mapped = registry.blocks.get(token)
    if mapped is None:
        return
    mapped.held = False
    if mapped.header[_LENT] == lend:
        mapped.header[_LENT] = 0
    if not alive(mapped.worker):
        registry.blocks.pop(token, None)
