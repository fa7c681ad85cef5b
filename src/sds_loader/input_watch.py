"""How long a training loop waits for its data: `InputWatch` wraps any iterable of batches.

The number that decides whether a loader matters is the loop's own: the time
it spends inside ``next()`` waiting for the next batch, against the time
between batches (the step: the model's work plus that wait). A loader's read
rate says nothing of it, since a loader that keeps ahead of the model costs
the loop nothing however slow it is. `InputWatch` measures both, per step,
with two reads of a monotonic clock a batch, and `report()` combines them
with the reads' stage times into `InputReport`, whose `diagnosis()` says in
words whether the loop is input-bound, on what, and what would help.

Usage::

    watch = InputWatch(loader, stats=dataset)   # dataset: SDSTorchDataset or BatchReader
    for batch in watch:
        step(batch)
    print(watch.report().diagnosis())
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from sds_loader.input_report import InputReport
from sds_loader.read_stats import ReadStats

T = TypeVar("T")


#: A reader (its `stats` attribute) or a dataset (its `stats()`), or a callable
#: returning (all reads, the workers' part of them).
StatsSource = Any


def _read_stats(source: StatsSource) -> tuple[ReadStats, ReadStats]:
    """(every read so far, the DataLoader workers' part of them) of `source`."""
    stats = getattr(source, "stats", source)
    if isinstance(stats, ReadStats):  # a BatchReader: one process
        return stats.snapshot(), ReadStats()
    if callable(stats):
        got = stats()
        if isinstance(got, ReadStats):
            return got.snapshot(), ReadStats()
        if isinstance(got, tuple):
            return got[0], got[1]
        return got.total, got.workers  # SDSTorchDataset's DatasetStats
    raise TypeError(
        f"stats= takes a BatchReader, an SDSTorchDataset or a callable returning their stats, "
        f"not {type(source).__name__}"
    )


class InputWatch(Generic[T]):
    """Iterates `batches` as they are, timing the loop's wait for each and the step between.

    `stats`: where the reads' stats come from (`SDSTorchDataset`, summed over
    its workers; or a `BatchReader`), taken when iteration starts and when
    `report()` is called, so that the report holds the reads of this pass.
    Each ``iter()`` starts a new pass.
    """

    def __init__(self, batches: Iterable[T], *, stats: StatsSource | None = None) -> None:
        self._batches = batches
        self._stats = stats
        self._waits: list[float] = []
        self._arrivals: list[float] = []
        self._start: tuple[ReadStats, ReadStats] | None = None
        self._clock: Callable[[], float] = time.perf_counter

    def __iter__(self) -> Iterator[T]:
        self._waits = []
        self._arrivals = []
        self._start = _read_stats(self._stats) if self._stats is not None else None
        clock = self._clock
        iterator = iter(self._batches)
        waits, arrivals = self._waits, self._arrivals
        while True:
            asked = clock()
            try:
                batch = next(iterator)
            except StopIteration:
                arrivals.append(clock())  # the last step ends when the loop asks again
                return
            arrived = clock()
            waits.append(arrived - asked)
            arrivals.append(arrived)
            yield batch

    def __len__(self) -> int:
        return len(self._batches)  # type: ignore[arg-type]

    def report(self) -> InputReport:
        """The pass so far: each step's wait and length, and the reads since it began."""
        steps = len(self._waits)
        arrivals = self._arrivals
        step_seconds = tuple(b - a for a, b in zip(arrivals, arrivals[1:], strict=False))
        reads = worker_reads = None
        if self._start is not None:
            now = _read_stats(self._stats)
            reads, worker_reads = now[0] - self._start[0], now[1] - self._start[1]
        return InputReport(
            steps=steps,
            waits=tuple(self._waits),
            step_seconds=step_seconds,
            reads=reads,
            worker_reads=worker_reads,
        )
