"""Time one method over a plan's batches: one warm-up batch, then the whole set.

Each method is a `Runner` that yields, batch by batch, how many records it
delivered. The warm-up batch (the first of the plan, untimed) pays for lazy
imports, opened files and started workers, so the timed pass measures the
steady state a training epoch sees. A pass shorter than MIN_SECONDS is run
again, up to MAX_PASSES, and the median pass is kept: a fast method's single
pass is a fraction of a second, which one scheduler hiccup can halve.
Failures become a row that says so rather than ending the run: one broken
method should not hide the others' numbers.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from sds_loader.cli.bench.plan import Plan
from sds_loader.cli.progress import progress as progress_bar

#: Passes are repeated until they add up to this many seconds...
MIN_SECONDS = 1.0
#: ...or there have been this many.
MAX_PASSES = 3


class Skip(Exception):
    """A method cannot run here; the message says why (shown in its row)."""


class Runner:
    """One way of reading a plan's batches."""

    #: The last batch made, kept alive until the next is (see methods.py).
    held: object = None

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
    #: Timed passes over the batches; `records` and `seconds` are the median one's.
    passes: int = 0
    is_bound: bool = False
    # Filled by the report, relative to the variant's other rows.
    mb_per_s: float | None = None
    x_vs_signal_dataset: float | None = None
    pct_of_bound: float | None = None

    @property
    def records_per_s(self) -> float | None:
        if self.status != "ok" or self.seconds <= 0:
            return None
        return self.records / self.seconds


def measure(
    plan: Plan, key: str, label: str, open_runner: Callable[[Plan], Runner], *, progress: bool = True
) -> Row:
    row = Row(plan.variant, key, label)
    try:
        runner = open_runner(plan)
    except Skip as exc:
        row.status, row.note = "skipped", str(exc)
        return row
    except Exception as exc:  # noqa: BLE001 - reported in the row, see module docstring
        row.status, row.note = "failed", f"{type(exc).__name__}: {exc}"
        return row
    try:
        for _ in runner.run(plan.batches[:1]):
            pass
        timings: list[float] = []
        with progress_bar(plan.records, f"{plan.variant}: {label}", leave=False, enabled=progress) as bar:
            spent = 0.0
            while len(timings) < MAX_PASSES and (not timings or spent < MIN_SECONDS):
                bar.reset()
                records = 0
                started = time.perf_counter()
                for count in runner.run(plan.batches):
                    records += count
                    bar.update(count)
                wall = time.perf_counter() - started
                spent += wall
                own = runner.timed_seconds()
                timings.append(own if own is not None else wall)
        row.records = records
        row.seconds = statistics.median(timings)
        row.passes = len(timings)
        row.note = runner.note()
    except Skip as exc:
        row.status, row.note = "skipped", str(exc)
    except Exception as exc:  # noqa: BLE001
        row.status, row.note = "failed", f"{type(exc).__name__}: {exc}"
    finally:
        runner.close()
    return row
