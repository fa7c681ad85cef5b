"""How many records each path served, counted from however many threads read at once.

One reader may be read from several threads at once (a prefetching loader,
say), and ``stats.x += n`` is a read and a write, so every update holds one
lock. It is the process's, not each reader's: a count is a few additions, and
one lock a batch is what a batch of a few short records can afford (tens of
microseconds a batch, of which each update costs one or two).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

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

    def _add(self, **counts: int) -> None:
        with _LOCK:
            for name, count in counts.items():
                setattr(self, name, getattr(self, name) + count)
