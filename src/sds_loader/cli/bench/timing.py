"""Time one method over a plan's batches: PASSES passes, each from a fresh runner.

Each method is a `Runner` that yields, batch by batch, how many records it
delivered. Every pass opens its own runner (a new reader, a new DataLoader),
reads one warm-up batch untimed for each process that reads (the first of
the plan: lazy imports, opened files; a DataLoader with workers warms each
worker, which opens a reader of its own), then times the whole set; the median pass
is kept. Every row gets the same number of passes from the same state, so
no row is timed on state an earlier timed pass of its own left behind (a
reader's filled file mappings, say) while another is not: the fast rows
are not flattered by later, warmer passes, and a single slow pass of
signal_dataset is not set against a median of three. Failures become a row
that says so rather than ending the run: one broken method should not hide
the others' numbers.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sds_loader.cli.bench.plan import Plan
from sds_loader.cli.progress import progress as progress_bar

if TYPE_CHECKING:
    from sds_loader.read_stats import ReadStats

#: Timed passes of every row, each from a freshly opened runner; the median is kept.
PASSES = 3
#: A row whose passes spread wider than this (fastest over slowest) is
#: called out: one figure of it would mislead, so it wants a quieter machine.
WIDE_SPREAD = 1.15
#: What the tables' header says of how a row's rate was taken.
PASSES_NOTE = f"median of {PASSES} passes, each by a fresh reader"


class Skip(Exception):
    """A method cannot run here; the message says why (shown in its row)."""


class Runner:
    """One way of reading a plan's batches."""

    #: The last batch made, kept alive until the next is (see methods.py).
    held: object = None
    #: Untimed batches before each pass: one per process that reads.
    warm_up_batches: int = 1

    def run(self, batches: Sequence[np.ndarray]) -> Iterator[int]:
        raise NotImplementedError

    def timed_seconds(self) -> float | None:
        """Seconds of the last run as the runner timed them itself, or None for wall time.

        The bounds time only the native work (decompression, copying), not the
        Python that gathers their input between calls.
        """
        return None

    def note(self) -> str:
        """Anything the reader of the table should know about how this ran."""
        return ""

    def read_stats(self) -> ReadStats | None:
        """The stats of every read this runner's readers made so far (all processes), or
        None where it reads without sds-loader: `--profile` shows their stage times."""
        return None

    def close(self) -> None:
        pass


@dataclass
class Row:
    variant: str
    key: str
    label: str
    status: str = "ok"  # "ok", "skipped" or "failed"
    records: int = 0
    seconds: float = 0.0
    note: str = ""
    #: Timed passes over the batches, each by a fresh runner; `records` and
    #: `seconds` are the median one's.
    passes: int = 0
    is_bound: bool = False
    # Filled by the report, relative to the variant's other rows.
    mb_per_s: float | None = None
    x_vs_signal_dataset: float | None = None
    pct_of_bound: float | None = None
    #: Seconds per stage of the median pass's reads (summed over threads and
    #: processes), for rows read by sds-loader.
    stage_seconds: dict[str, float] | None = None
    #: Each timed pass's records/s, in the order they ran.
    pass_rates: list[float] | None = None

    @property
    def spread(self) -> float | None:
        """The fastest pass's rate over the slowest's (1.0: every pass alike)."""
        rates = [r for r in self.pass_rates or [] if r > 0]
        return max(rates) / min(rates) if len(rates) > 1 else None

    @property
    def records_per_s(self) -> float | None:
        if self.status != "ok" or self.seconds <= 0:
            return None
        return self.records / self.seconds


def measure(
    plan: Plan,
    key: str,
    label: str,
    open_runner: Callable[[Plan], Runner],
    *,
    progress: bool = True,
    passes: int = PASSES,
) -> Row:
    row = Row(plan.variant, key, label)
    timings: list[float] = []
    stages: list[dict[str, float]] = []
    try:
        with progress_bar(
            plan.records * passes, f"{plan.variant}: {label}", leave=False, enabled=progress
        ) as bar:
            for _ in range(passes):
                runner = open_runner(plan)
                try:
                    for _ in runner.run(plan.batches[: max(1, runner.warm_up_batches)]):
                        pass
                    records = 0
                    before = runner.read_stats()
                    started = time.perf_counter()
                    for count in runner.run(plan.batches):
                        records += count
                        bar.update(count)
                    wall = time.perf_counter() - started
                    after = runner.read_stats()
                    own = runner.timed_seconds()
                    timings.append(own if own is not None else wall)
                    if before is not None and after is not None:
                        stages.append((after - before).stage_seconds)
                    row.note = runner.note()
                finally:
                    runner.close()
        row.records = records
        row.seconds = statistics.median(timings)
        row.passes = len(timings)
        row.pass_rates = [records / t for t in timings if t > 0]
        if len(stages) == len(timings):
            # The median pass's own stage times (the middle one of an odd count).
            row.stage_seconds = stages[
                sorted(range(len(timings)), key=timings.__getitem__)[len(timings) // 2]
            ]
    except Skip as exc:
        row.status, row.note = "skipped", str(exc)
    except Exception as exc:  # noqa: BLE001 - reported in the row, see module docstring
        row.status, row.note = "failed", f"{type(exc).__name__}: {exc}"
    return row
