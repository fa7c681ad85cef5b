"""BatchReader on small batches, where a read's fixed costs show.

A training step may ask for a handful of records at a time (a large model, a
small batch per device). Then what every read() pays whatever its size
(planning, handing runs to threads and waking them) weighs as much as the
decoding, and a second thread can cost more than it brings. These rows read
the plan's very records again, split into batches of 4 and of 16, at 1 and 2
threads, so that the table shows whether threads help at that size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np

from sds_loader.cli.bench import methods
from sds_loader.cli.bench.plan import Plan
from sds_loader.cli.bench.timing import Runner
from sds_loader.read_stats import ReadStats

SIZES = (4, 16)
THREADS = (1, 2)


def threads_label(threads: int) -> str:
    return f"{threads} thread{'s' * (threads != 1)}"


class _SmallBatches(Runner):
    def __init__(self, plan: Plan, size: int, threads: int) -> None:
        self.whole = methods.batch_reader(threads)(plan)
        self.size = size

    def run(self, batches: Sequence[np.ndarray]) -> Iterator[int]:
        records = np.concatenate(batches) if batches else np.empty(0, np.int64)
        for start in range(0, records.size, self.size):
            small = records[start : start + self.size]
            self.held = self.whole.reader.read(small)
            yield small.size

    def note(self) -> str:
        return self.whole.note()

    def read_stats(self) -> ReadStats:
        return self.whole.reader.stats.snapshot()


def _factory(size: int, threads: int) -> Callable[[Plan], Runner]:
    def open_runner(plan: Plan) -> Runner:
        return _SmallBatches(plan, size, threads)

    return open_runner


def method_rows() -> list[tuple[str, str, Callable[[Plan], Runner]]]:
    """(key, label, runner factory) of each small-batch row."""
    return [
        (
            f"batchreader_b{size}_t{threads}",
            f"BatchReader.read, batches of {size}, {threads_label(threads)}",
            _factory(size, threads),
        )
        for size in SIZES
        for threads in THREADS
    ]
