"""How many records each path served, counted from however many threads read at once.

One reader may be read from several threads at once (a prefetching loader,
say), and ``stats.x += n`` is a read and a write, so every update holds one
lock. It is the process's, not each reader's: a count is a few additions, and
one lock a batch is what a batch of a few short records can afford (tens of
microseconds a batch, of which each update costs one or two).

Beside the counts, the seconds each stage of the reads took (`stage_seconds`,
see `sds_loader.stage_times`); `snapshot()` freezes both, and two snapshots
subtract (what a span of reads did) or add (two processes' reads).

The reader's counting is here too: what its source fetched (`count_fetches`)
and what each batch did (`count_native_batch`, `count_fallback_batch`).
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from sds_loader import stage_times

if TYPE_CHECKING:
    from sds_loader.process_state import ProcessState

_LOCK = threading.Lock()


def _fresh_lock_after_fork() -> None:
    global _LOCK
    # A thread of the parent may have held it at the instant of the fork; that
    # thread does not exist in the child, so the copy would never be released.
    _LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fresh_lock_after_fork)


def lock() -> threading.Lock:
    """The lock every update of a `ReadStats` holds (a fresh one after a fork)."""
    return _LOCK


@dataclass
class ReadStats:
    """How many records each path served since the reader was made."""

    native_records: int = 0
    fallback_records: int = 0
    batches: int = 0
    #: Batches read twice because a record disagreed with the assumed layout.
    schema_retries: int = 0
    #: Ranged GETs and bytes the native path fetched from object storage (0 for local shards).
    fetch_requests: int = 0
    fetched_bytes: int = 0
    #: Native batches in which a helper thread, not only the caller's, decoded
    #: records (a small warm batch stays on one thread; see docs/reading.md).
    helped_batches: int = 0
    #: The node cache (`cache_dir`): ranges served from it whole, ranges that
    #: fetched some of their bytes, and bytes served from it.
    cache_hits: int = 0
    cache_misses: int = 0
    cache_hit_bytes: int = 0
    #: GET attempts tried again after a fault on the way (a reset, a short body,
    #: a 5xx answer, a stall): what `max_attempts` bounds per range.
    fetch_retries: int = 0
    #: Bytes read again because they failed a check (a chunk's hash or header, a
    #: shard's footer): one per run of chunks or shard opening, apart from
    #: `fetch_retries`. A store's bytes may be damaged on their way; they are
    #: fetched again, `max_attempts` times in all, before the read raises.
    refetches: int = 0
    #: Node-cache entries dropped because their bytes failed a check.
    cache_drops: int = 0
    #: Seconds per stage (`stage_times.STAGES`), summed over the threads that read.
    _stage: np.ndarray = field(default_factory=stage_times.zeros, repr=False, compare=False)

    @property
    def stage_seconds(self) -> dict[str, float]:
        """Seconds the reads spent in each stage, summed over their threads: the core's
        ("plan", "wait", "hash", "decompress", "parse", "copy", "augment") and "python"."""
        return stage_times.as_mapping(self._stage)

    def snapshot(self) -> ReadStats:
        """A copy of the counts and stage times as they are now, which later reads leave alone."""
        with _LOCK:
            return self._copy()

    def __add__(self, other: ReadStats) -> ReadStats:
        return self._combine(other, 1)

    def __sub__(self, other: ReadStats) -> ReadStats:
        return self._combine(other, -1)

    def _copy(self) -> ReadStats:
        copy = dataclasses.replace(self, _stage=self._stage.copy())
        return copy

    def _combine(self, other: ReadStats, sign: int) -> ReadStats:
        if not isinstance(other, ReadStats):
            return NotImplemented
        counts = {f.name: getattr(self, f.name) + sign * getattr(other, f.name) for f in _count_fields()}
        return ReadStats(**counts, _stage=self._stage + sign * other._stage)

    def _add(self, **counts: int) -> None:
        with _LOCK:
            for name, count in counts.items():
                setattr(self, name, getattr(self, name) + count)


def _count_fields() -> tuple[dataclasses.Field[int], ...]:
    return tuple(f for f in dataclasses.fields(ReadStats) if f.name != "_stage")


def stage_array(stats: ReadStats) -> np.ndarray:
    """`stats`' seconds per stage as one array in `stage_times.STAGES` order (a copy)."""
    return stats._stage.copy()


def count_fetches(stats: ReadStats, state: ProcessState) -> None:
    """Add to `stats` what `state`'s source fetched, and its node cache served, since the last count."""
    # What the source fetched since the last count, whichever read it was
    # for: with reads on several threads, a difference taken around each
    # read would count the others' requests too.
    if state.source is None:
        return  # local shards: nothing is fetched, and the lock is not free
    with _LOCK:
        fetched = state.fetched()
        counted, state.counted = state.counted, fetched
        stats.fetch_requests += fetched[0] - counted[0]
        stats.fetched_bytes += fetched[1] - counted[1]
        stats.fetch_retries += fetched[2] - counted[2]
        stats.refetches += fetched[3] - counted[3]
        cache = state.source.cache_counters
        now = (cache.hits, cache.misses, cache.hit_bytes, cache.dropped)
        before, state.cache_counted = state.cache_counted, now
        stats.cache_hits += now[0] - before[0]
        stats.cache_misses += now[1] - before[1]
        stats.cache_hit_bytes += now[2] - before[2]
        stats.cache_drops += now[3] - before[3]
    state.source.check_cache()


def count_fallback_batch(stats: ReadStats, records: int, batches: int, started: float | None) -> None:
    """A read signal_dataset served whole: its records, batches, and Python's time since
    `started` (None: the reader times no stage)."""
    stats._add(fallback_records=records, batches=batches)
    if started is not None:
        with _LOCK:
            stats._stage[-1] += time.perf_counter() - started


def count_failed_native(stats: ReadStats, native: Any, helped: int, started: float) -> None:
    """A native read that raised: the batches helpers decoded of it, and its stage times."""
    stats._add(helped_batches=helped)
    with _LOCK:
        native.add_stage_seconds(stats._stage, time.perf_counter() - started)


def count_native_batch(
    stats: ReadStats,
    native: Any,
    *,
    records: int,
    fallback_records: int,
    helped: int,
    batches: int,
    started: float,
) -> None:
    """A read the native core served (`fallback_records` of it by signal_dataset), in one update."""
    # One update (one lock) a batch, written out rather than through _add's
    # keywords: a batch of a few short records is read in tens of
    # microseconds, and each update cost one or two.
    with _LOCK:
        stats.helped_batches += helped
        stats.fallback_records += fallback_records
        stats.native_records += records - fallback_records
        stats.batches += batches
        native.add_stage_seconds(stats._stage, time.perf_counter() - started)


def count_helped(stats: ReadStats, helped: int) -> None:
    """Batches helper threads decoded of a read that then failed in signal_dataset's reader."""
    stats._add(helped_batches=helped)


def count_schema_retry(stats: ReadStats) -> None:
    """A batch read again because a record disagreed with the layout assumed for it."""
    stats._add(schema_retries=1)
