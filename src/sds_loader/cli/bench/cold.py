"""`bench --cold`: every pass reads shards whose pages were just dropped.

A dataset larger than RAM is read from the disk every epoch, and then what
counts is how many reads are in flight, not how fast one core decodes. Before
each pass (the warm-up batch included) this mode asks the kernel to drop the
shards' pages from the page cache (POSIX_FADV_DONTNEED, which needs no
privileges and leaves other files alone), then times BatchReader at its
default thread count and at 1, 2, 8 and 32 threads, beside signal_dataset's
batched read under the same conditions. Dropping is not timed.

The kernel keeps a page that a process has mapped or is reading: BatchReader
maps the shards it reads from the page cache, so its files are closed before
each pass. On a busy machine a "cold" pass can still be partly warm; the rows
are comparable with each other, as each starts from the same state.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from sds_loader.cli.bench import bounds, methods
from sds_loader.cli.bench.plan import Plan
from sds_loader.cli.bench.small_batches import threads_label
from sds_loader.cli.bench.timing import Runner

THREADS = (1, 2, 8, 32)


def drop_pages(paths: Sequence[str]) -> None:
    """Asks the kernel to forget the cached pages of every file in `paths`."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


class _Cold(Runner):
    """Another runner, each of its passes started on dropped pages and timed here."""

    def __init__(self, inner: Runner, paths: list[str]) -> None:
        self.inner = inner
        self.paths = paths
        self.seconds: float | None = None

    def run(self, batches: Sequence[np.ndarray]) -> Iterator[int]:
        # A reader maps the shards it reads warm, and the kernel keeps pages
        # that are mapped: the reader lets go of its files first (reopening
        # them is part of the timed pass).
        release = getattr(self.inner, "release_files", None)
        if release is not None:
            release()
        drop_pages(self.paths)
        started = time.perf_counter()
        for count in self.inner.run(batches):
            self.held = self.inner.held
            yield count
        self.seconds = time.perf_counter() - started

    def timed_seconds(self) -> float | None:
        return self.seconds

    def note(self) -> str:
        return self.inner.note()

    def close(self) -> None:
        self.inner.close()


def cold(open_runner: Callable[[Plan], Runner]) -> Callable[[Plan], Runner]:
    def open_cold(plan: Plan) -> Runner:
        if not hasattr(os, "posix_fadvise"):
            from sds_loader.cli.bench.timing import Skip

            raise Skip("skipped: dropping pages needs posix_fadvise, which this system lacks")
        return _Cold(open_runner(plan), [shard.path for shard in plan.touched()])

    return open_cold


def method_table(default_threads: int) -> list[tuple[str, str, Callable[[Plan], Runner]]]:
    """(key, label, runner factory) of every row of a cold variant, in table order."""
    rows = [
        ("sds_getitems", "SDS Dataset.__getitems__ + default_collate, cold", cold(methods.sds_getitems)),
        (
            "batchreader_default",
            f"BatchReader.read, default ({threads_label(default_threads)}), cold",
            cold(methods.batch_reader(None)),
        ),
    ]
    rows += [
        (
            f"batchreader_{threads}",
            f"BatchReader.read, {threads_label(threads)}, cold",
            cold(methods.batch_reader(threads)),
        )
        for threads in THREADS
    ]
    rows += [
        ("bound_decompress", "bound: decompression alone, in memory, 1 thread", bounds.decompress),
        ("bound_memcpy", "bound: memcpy of the records, in memory, 1 thread", bounds.memcpy),
    ]
    return rows
