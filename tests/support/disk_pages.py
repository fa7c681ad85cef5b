"""Dropping a file's pages from the page cache, for tests of cold reads.

Files for such tests live in the `disk_path` fixture's folders (conftest.py),
on the checkout's disk: on tmpfs the pages are the files and never leave.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import time

import pytest

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]


def cached_pages(path: str) -> list[bool]:
    """Whether each of `path`'s pages is in the page cache.

    Asked with mincore, which only looks. A one-byte read with RWF_NOWAIT
    that misses starts the kernel's readahead, so probing that way brings
    back, while the test goes on, the very pages it has just dropped (and
    would see a hint work that did nothing).
    """
    size = os.path.getsize(path)
    if size == 0:
        return []
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    # A private mapping, so that ctypes gets a writable buffer to take the
    # address of; nothing is written, so every page stays the file's own.
    with open(path, "rb") as file, mmap.mmap(file.fileno(), size, access=mmap.ACCESS_COPY) as mapping:
        first = ctypes.c_char.from_buffer(mapping)
        try:
            flags = ctypes.create_string_buffer(pages)
            if _libc.mincore(ctypes.addressof(first), size, flags) != 0:
                error = ctypes.get_errno()
                raise OSError(error, f"mincore of {path}: {os.strerror(error)}")
            return [bool(flag & 1) for flag in flags.raw[:pages]]
        finally:
            del first  # the mapping cannot close while ctypes points into it


def page_cached(path: str, offset: int) -> bool:
    """Whether the page holding byte `offset` of `path` is in the page cache."""
    return cached_pages(path)[offset // mmap.PAGESIZE]


def drop_cached_pages(path: str) -> None:
    """Drops all of `path`'s pages from the page cache, or fails saying why it could not.

    A page just used may sit in another CPU's batch of pages on their way to
    the LRU lists, which the kernel skips when it drops pages: ask a few times.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)  # dirty pages cannot be dropped, clean ones can
        for _ in range(20):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            if not any(cached_pages(path)):
                return
            time.sleep(0.05)
    finally:
        os.close(fd)
    pytest.fail(
        f"the kernel keeps pages of {path} cached after POSIX_FADV_DONTNEED: its folder is not on "
        "a disk-backed file system (tmpfs keeps its pages), or another process maps it; run the "
        "tests from a checkout on a disk"
    )
