"""The read stats of every DataLoader worker a dataset started, summed in the main process.

Each process has a reader of its own (`SDSTorchDataset.reader`), so what the
workers read, fetched and spent time on is out of the training loop's sight.
A `WorkerStatsBoard` is a table of slots in shared memory, made with the
dataset: forked workers inherit it and spawned ones receive it as a handle
while they start, as `SharedEpoch` is passed. Each worker takes a slot (its
worker id's, unless a live process holds that one) and after every batch
writes there what its reader did since it started, added to what the slot
held when it was taken: a worker of a later epoch (workers that are not
persistent start again every epoch) carries on the totals of the one before
it. The main process sums the slots whenever it is asked, without stopping
a worker: each slot is written under a sequence number (a seqlock), and a
reading taken while a worker was writing is taken again.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
from multiprocessing.context import get_spawning_popen
from typing import Any

import numpy as np

from sds_loader import stage_times
from sds_loader.read_stats import ReadStats, stage_array
from sds_loader.torch.worker_processes import alive

#: Workers whose stats one board holds at once (a worker beyond them, every
#: slot held by a live process, goes uncounted).
SLOTS = 256
_COUNTS = tuple(f.name for f in dataclasses.fields(ReadStats) if f.name != "_stage")
#: Per slot: sequence number, owner's pid, then the counts.
_INTS = 2 + len(_COUNTS)
_FLOATS = len(stage_times.STAGES)
_ATTEMPTS = 1000


class WorkerStatsBoard:
    """A slot of read stats per DataLoader worker, in memory every worker shares."""

    __slots__ = ("_ints", "_floats", "_slot", "_base", "_start")

    def __init__(self) -> None:
        self._ints: Any = multiprocessing.RawArray("q", SLOTS * _INTS)
        self._floats: Any = multiprocessing.RawArray("d", SLOTS * _FLOATS)
        self._slot: int | None = None
        self._base: ReadStats | None = None
        self._start: ReadStats | None = None

    def __getstate__(self) -> dict[str, object]:
        if get_spawning_popen() is not None:  # a worker being started: share the table
            return {"ints": self._ints, "floats": self._floats}
        return {}  # pickled to anywhere else: a table of its own

    def __setstate__(self, state: dict[str, object]) -> None:
        if "ints" in state:
            self._ints = state["ints"]
            self._floats = state["floats"]
        else:
            self._ints = multiprocessing.RawArray("q", SLOTS * _INTS)
            self._floats = multiprocessing.RawArray("d", SLOTS * _FLOATS)
        self._slot = self._base = self._start = None

    def _views(self) -> tuple[np.ndarray, np.ndarray]:
        ints = np.frombuffer(self._ints, dtype=np.int64).reshape(SLOTS, _INTS)
        floats = np.frombuffer(self._floats, dtype=np.float64).reshape(SLOTS, _FLOATS)
        return ints, floats

    def claim(self, worker_id: int, stats: ReadStats) -> None:
        """Take a slot for this worker process, whose reader's stats are `stats` now."""
        ints, _ = self._views()
        pid = os.getpid()
        order = [worker_id % SLOTS, *range(SLOTS)]
        for slot in order:
            owner = int(ints[slot, 1])
            if owner == pid or not alive(owner):
                break
        else:
            return  # every slot held by a live worker: this one goes uncounted
        ints[slot, 1] = pid
        self._slot = slot
        self._base = self._read(slot)
        self._start = stats.snapshot()

    def publish(self, stats: ReadStats) -> None:
        """Write this worker's slot: what the slot held when taken, plus its reader's reads since."""
        if self._slot is None or self._base is None or self._start is None:
            return
        now = self._base + (stats.snapshot() - self._start)
        ints, floats = self._views()
        row = ints[self._slot]
        row[0] += 1  # odd: being written
        row[2:] = [getattr(now, name) for name in _COUNTS]
        floats[self._slot] = stage_array(now)
        row[0] += 1

    def _read(self, slot: int) -> ReadStats:
        ints, floats = self._views()
        for _ in range(_ATTEMPTS):
            sequence = int(ints[slot, 0])
            counts = ints[slot, 2:].tolist()
            stages = floats[slot].copy()
            if sequence % 2 == 0 and int(ints[slot, 0]) == sequence:
                break
        return ReadStats(**dict(zip(_COUNTS, counts, strict=True)), _stage=stages)

    def total(self) -> ReadStats:
        """The sum of every slot: all the workers' reads so far."""
        ints, _ = self._views()
        total = ReadStats()
        for slot in np.flatnonzero(ints[:, 1]).tolist():
            total = total + self._read(int(slot))
        return total


@dataclasses.dataclass(frozen=True)
class DatasetStats:
    """A dataset's read stats summed over the main process and every worker it started."""

    #: Everything read since the dataset was made.
    total: ReadStats
    #: Since the last `set_epoch` (or the dataset's making, before any).
    iteration: ReadStats
    #: The DataLoader workers' part of `total` (the rest is this process's).
    workers: ReadStats
