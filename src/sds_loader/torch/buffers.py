"""Where a batch's tensors live: shared, pinned, or pooled page-aligned memory.

The native reader writes each record once, into whatever buffer its allocator
hands it. Choosing that buffer well is what removes the copies a DataLoader
would otherwise make after the read:

- In a DataLoader worker the batch must cross to the main process. A tensor
  whose storage is already in shared memory crosses as a handle; any other is
  first copied into shared memory by torch's pickler. So workers allocate
  straight from shared memory, as torch's own ``default_collate`` does for the
  batches it stacks.
- In the main process with ``pin_memory``, the DataLoader's pin step copies
  every tensor that is not already page-locked. Allocating the batch pinned
  makes that step return the same tensors. torch's caching host allocator
  already is the pool here, and unlike a pool of our own it knows when an
  asynchronous host-to-device copy still reads a block, so a block is never
  overwritten under a copy in flight.
- Otherwise the batch goes into a page-aligned block from `PagePool`, which is
  handed out again only once every tensor (and every view, and every numpy
  array made from one) of the batch that used it is gone.

Each source returns the tensor the caller will keep and a numpy view of the
same memory for the reader to fill, so nothing is copied between the two.
"""

from __future__ import annotations

import collections
import functools
import mmap
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch as _torch

from sds_loader.schema import Allocator

PAGE_SIZE = mmap.PAGESIZE


@functools.cache
def torch_dtype(dtype: np.dtype) -> _torch.dtype:
    """The torch dtype that `torch.from_numpy` gives an array of `dtype`."""
    return _torch.from_numpy(np.empty(0, dtype=dtype)).dtype


def _nbytes(shape: Sequence[int], dtype: np.dtype) -> int:
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize


class BufferSource:
    """Makes one uninitialised tensor and a numpy view of the same memory."""

    #: A short name for reprs and error messages.
    kind = "heap"

    def new(self, shape: tuple[int, ...], dtype: np.dtype) -> tuple[_torch.Tensor, np.ndarray]:
        array = np.empty(shape, dtype=dtype)
        return _torch.from_numpy(array), array

    def start_batch(self) -> None:
        """Called before the arrays of one batch are made (a ring picks its block here)."""

    def finish_batch(self) -> object | None:
        """Called after them; what the batch needs to carry to its collate (a ring block), if anything."""
        return None


class SharedMemorySource(BufferSource):
    """Tensors in shared memory, so a worker hands them to the main process by handle."""

    kind = "shared"

    def new(self, shape: tuple[int, ...], dtype: np.dtype) -> tuple[_torch.Tensor, np.ndarray]:
        nbytes = _nbytes(shape, dtype)
        if nbytes == 0:
            return super().new(shape, dtype)
        # _new_shared maps fresh shared memory directly; torch.empty(...).share_memory_()
        # would first allocate private memory and then copy it (uninitialised) across.
        # (torch's stubs leave _new_shared untyped and know set_ only without a size or with a stride.)
        storage = _torch.UntypedStorage._new_shared(nbytes)  # type: ignore[no-untyped-call]
        tensor = _torch.empty(0, dtype=torch_dtype(np.dtype(dtype))).set_(storage, 0, shape)  # type: ignore[call-overload]
        return tensor, tensor.numpy()


class PinnedSource(BufferSource):
    """Page-locked tensors from torch's caching host allocator."""

    kind = "pinned"

    def new(self, shape: tuple[int, ...], dtype: np.dtype) -> tuple[_torch.Tensor, np.ndarray]:
        tensor = _pinned_empty(shape, torch_dtype(np.dtype(dtype)))
        return tensor, tensor.numpy()


def _pinned_empty(shape: tuple[int, ...], dtype: _torch.dtype) -> _torch.Tensor:
    return _torch.empty(shape, dtype=dtype, pin_memory=True)


class PagePool(BufferSource):
    """Page-aligned blocks, each reused once nothing made from it is alive.

    A block is an anonymous memory map, so it starts on a page boundary and
    goes back to the operating system when dropped. Handing out a block makes a
    fresh numpy array over it and a tensor over that array; the tensor's
    storage (shared by every view and every ``.numpy()`` made from it) is what
    keeps that array alive, so a weak-reference finalizer on the array fires
    exactly when the last user of the batch lets go, and puts the block back.

    Blocks are matched by page-rounded size: a DataLoader's batches all have
    one size but the last, so exact matching loses nothing and never hands a
    small batch a large block. At most `max_free` idle blocks are kept; older
    ones are dropped. The free list is a deque because finalizers run on
    whichever thread drops the last reference (the pin-memory thread, say), and
    deque appends and pops are atomic without a lock a finalizer could
    deadlock on.
    """

    kind = "pool"

    def __init__(self, max_free: int = 8) -> None:
        if max_free < 0:
            raise ValueError(f"max_free must be zero or more, not {max_free}")
        self._free: collections.deque[np.ndarray] = collections.deque(maxlen=max_free or None)
        self._max_free = max_free
        #: Blocks mapped since the pool was made (reuse does not count).
        self.blocks_made = 0
        #: Blocks handed out again after their previous batch was released.
        self.blocks_reused = 0

    @property
    def free_blocks(self) -> int:
        return len(self._free)

    def new(self, shape: tuple[int, ...], dtype: np.dtype) -> tuple[_torch.Tensor, np.ndarray]:
        dtype = np.dtype(dtype)
        nbytes = _nbytes(shape, dtype)
        if nbytes == 0:
            return super().new(shape, dtype)
        size = -(-nbytes // PAGE_SIZE) * PAGE_SIZE
        block = self._take(size)
        array = block[:nbytes].view(dtype).reshape(shape)
        if self._max_free:
            finalizer = weakref.finalize(array, _give_back, weakref.ref(self), block)
            finalizer.atexit = False
        return _torch.from_numpy(array), array

    def _take(self, size: int) -> np.ndarray:
        free = self._free
        for _ in range(len(free)):
            try:
                block = free.popleft()
            except IndexError:
                break
            if block.size == size:
                self.blocks_reused += 1
                return block
            free.append(block)
        self.blocks_made += 1
        return np.frombuffer(_anonymous_map(size), dtype=np.uint8)

    def _release(self, block: np.ndarray) -> None:
        self._free.append(block)

    def __getstate__(self) -> dict[str, object]:
        # Blocks are process-local memory; a copy of the pool starts empty.
        return {"max_free": self._max_free}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(int(state["max_free"]))  # type: ignore[misc]


def _anonymous_map(size: int) -> mmap.mmap:
    """Zeroed, page-aligned private memory; a forked child gets its own copy on write."""
    private = getattr(mmap, "MAP_PRIVATE", None)
    if private is None:  # Windows: anonymous maps are process-private already
        return mmap.mmap(-1, size)
    return mmap.mmap(-1, size, flags=private | getattr(mmap, "MAP_ANONYMOUS", 0))


def _give_back(pool_ref: weakref.ref[PagePool], block: np.ndarray) -> None:
    pool = pool_ref()
    if pool is not None:
        pool._release(block)


def read_tensors(
    read: Callable[[Allocator], Mapping[str, np.ndarray]], source: BufferSource
) -> tuple[dict[str, _torch.Tensor], object | None]:
    """Run `read` with an allocator drawing on `source`; return its arrays as those tensors.

    `read` receives the allocator to pass to `BatchReader.read`. Each array it
    returns is matched, by identity, to the tensor made with it; an array the
    reader made some other way (none does today) is wrapped without a copy.
    The second value is what `source.finish_batch` returned.
    """
    made: dict[int, tuple[np.ndarray, _torch.Tensor]] = {}

    def allocate(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        tensor, array = source.new(tuple(shape), dtype)
        made[id(array)] = (array, tensor)
        return array

    source.start_batch()
    try:
        arrays = read(allocate)
    finally:
        carried = source.finish_batch()
    tensors: dict[str, _torch.Tensor] = {}
    for name, array in arrays.items():
        entry = made.get(id(array))
        tensors[name] = entry[1] if entry is not None and entry[0] is array else _torch.from_numpy(array)
    return tensors, carried
