"""An allocator for a read task's batches that hands memory out again once nothing holds it.

A block of a few tens of MiB is its own mapping to the C allocator: made
fresh for every read, its pages are zeroed and mapped by the kernel as the
decoder first writes them, about a quarter of a zstd read's time. A read task
yields one batch after another and Ray copies each into its object store, so
the memory of the last one is usually free again by the next read.

A block is free when nothing but this pool refers to it: every numpy view of
it (and the Arrow buffers made over those views) holds a reference to the
block itself, since numpy makes a view's base the array that owns the
memory, so the block's reference count says whether anything still reads it.
Nothing is ever handed out twice while in use; at worst a block stays busy
and a fresh one is made.
"""

from __future__ import annotations

import os
import sys

import numpy as np

#: Arrays smaller than this come from numpy as usual: the C allocator reuses their memory itself.
MIN_BYTES = 1 << 20
#: Blocks kept per pool, busy or idle.
KEPT = 4


def _references(blocks: list[np.ndarray]) -> int:
    for block in blocks:
        return sys.getrefcount(block)
    return 0


class ReusedBlocks:
    """`BatchReader.read(..., allocator=pool)`: large arrays over blocks reused when idle."""

    def __init__(self) -> None:
        self._blocks: list[np.ndarray] = []
        # What a block's reference count reads when only this pool holds it,
        # counted along the same path the check takes.
        probe = [np.empty(1, dtype=np.uint8)]
        self._idle = _references(probe[0:1])

    def __call__(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if nbytes < MIN_BYTES:
            return np.empty(shape, dtype=dtype)
        block = self._idle_block(nbytes)
        if block is None:
            block = np.empty(nbytes, dtype=np.uint8)
            self._blocks.append(block)
            if len(self._blocks) > KEPT:
                self._drop_one()
        return block[:nbytes].view(dtype).reshape(shape)

    def _idle_block(self, nbytes: int) -> np.ndarray | None:
        for index in range(len(self._blocks)):
            # Only blocks that fit without wasting half of themselves.
            if nbytes <= self._blocks[index].size <= 2 * nbytes and self._is_idle(index):
                return self._blocks[index]
        return None

    def _is_idle(self, index: int) -> bool:
        return _references(self._blocks[index : index + 1]) == self._idle

    def _drop_one(self) -> None:
        """Forget the oldest idle block, else the oldest (whose users keep it alive until done)."""
        for index in range(len(self._blocks) - 1):
            if self._is_idle(index):
                del self._blocks[index]
                return
        del self._blocks[0]


_pool: tuple[int, ReusedBlocks] | None = None


def process_pool() -> ReusedBlocks:
    """This process's pool (a forked child makes its own)."""
    global _pool
    if _pool is None or _pool[0] != os.getpid():
        _pool = (os.getpid(), ReusedBlocks())
    return _pool[1]
