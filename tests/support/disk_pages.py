"""Dropping a file's pages from the page cache, for tests of cold reads.

Files for such tests live in the `disk_path` fixture's folders (conftest.py),
on the checkout's disk: on tmpfs the pages are the files and never leave.
"""

from __future__ import annotations

import os
import time

import pytest


def drop_cached_pages(path: str, probe_offset: int) -> None:
    """Drops `path`'s pages from the page cache, or fails saying why it could not.

    A page just used may sit in another CPU's batch of pages on their way to
    the LRU lists, which the kernel skips when it drops pages: ask a few times.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)  # dirty pages cannot be dropped, clean ones can
        for _ in range(20):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            try:
                os.preadv(fd, [bytearray(1)], probe_offset, os.RWF_NOWAIT)
            except BlockingIOError:
                return
            time.sleep(0.05)
    finally:
        os.close(fd)
    pytest.fail(
        f"the kernel keeps the pages of {path} cached after POSIX_FADV_DONTNEED: its folder is not on "
        "a disk-backed file system (tmpfs keeps its pages); run the tests from a checkout on a disk"
    )
