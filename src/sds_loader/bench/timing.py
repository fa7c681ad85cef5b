"""Time one method over a plan's batches: one warm-up batch, then the whole set.

Each method is a `Runner` that yields, batch by batch, how many records it
delivered. The warm-up batch (the first of the plan, untimed) pays for lazy
imports, opened files and started workers, so the timed pass measures the
steady state a training epoch sees. Failures become a row that says so rather
than ending the run: one broken method should not hide the others' numbers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from sds_loader.bench.plan import Plan


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
        with tqdm(
            total=plan.records, unit="rec", desc=f"{plan.variant}: {label}", delay=1.0,
            leave=False, disable=not progress,
        ) as bar:
            started = time.perf_counter()
            for count in runner.run(plan.batches):
                row.records += count
                bar.update(count)
            row.seconds = time.perf_counter() - started
        own = runner.timed_seconds()
        if own is not None:
            row.seconds = own
        row.note = runner.note()
    except Skip as exc:
        row.status, row.note = "skipped", str(exc)
    except Exception as exc:  # noqa: BLE001
        row.status, row.note = "failed", f"{type(exc).__name__}: {exc}"
    finally:
        runner.close()
    return row
