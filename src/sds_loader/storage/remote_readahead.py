"""Readahead for shards in object storage, off the caller's thread.

`BatchReader.will_need` promises to return at once and never to raise. For
local shards the native core keeps that promise itself (posix_fadvise on a
thread of its own). For object storage, announcing records means opening
their shards (footer requests) and fetching their chunks, which takes round
trips and can fail; done on the caller's thread it would block a training
loop on the network and raise StorageError from a hint. So announcements are
queued here and carried out by one background thread per reader and process:
it opens the shards, lets the core turn the records into chunk ranges, and
hands those to the byte source, whose own native thread fetches them into its
bounded readahead cache, which later reads use. Every error is dropped: the read that needs the bytes fetches
them again and reports what goes wrong.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sds_loader._native import ShardSet
    from sds_loader.storage.native_range import NativeRangeSource

#: Announcements waiting for the thread; past this they are dropped, as a
#: hint that arrives too late is worth nothing.
PENDING = 16


class RemoteReadahead:
    """One thread that carries out a reader's announcements for object storage."""

    def __init__(self, native: ShardSet, source: NativeRangeSource) -> None:
        self._native = native
        self._source = source
        self._queue: queue.Queue[tuple[np.ndarray, np.ndarray] | None] = queue.Queue(maxsize=PENDING)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._busy = 0
        self._idle = threading.Condition(self._lock)

    def announce(self, files: np.ndarray, records: np.ndarray) -> None:
        """Queue `records` of `files` for readahead; returns at once, never raises."""
        with self._lock:
            if self._closed:
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="sds-loader-readahead", daemon=True)
                self._thread.start()
            try:
                self._queue.put_nowait((files, records))
            except queue.Full:
                return
            self._busy += 1

    def wait_idle(self, timeout: float) -> bool:
        """Wait until every queued announcement has been carried out (for tests); False on timeout."""
        deadline = time.monotonic() + timeout
        with self._idle:
            if not self._idle.wait_for(lambda: self._busy == 0, timeout):
                return False
        # The source fetches what the announcements handed it on a thread of its own.
        return self._source.wait_readahead(max(deadline - time.monotonic(), 0.0))

    def close(self) -> None:
        """Stop taking announcements; the thread ends after the one it is on."""
        with self._lock:
            self._closed = True
            thread = self._thread
        if thread is not None:
            # Unblocks the thread's get; with the queue full, it sees _closed after its item.
            try:
                self._queue.put_nowait(None)
            except queue.Full:
                pass

    def _run(self) -> None:
        from sds_loader import _native

        while True:
            item = self._queue.get()
            if item is None:
                return
            files, records = item
            try:
                if not self._closed:
                    self._source.open_shards(np.unique(files).tolist())
                    # The core opens each shard's footer (from the tails just
                    # fetched) and hands the chunk ranges to the source's
                    # will_need, which fetches them into its cache.
                    _native.hint_records(self._native, files, records)
            except Exception:  # noqa: BLE001 - a hint never fails; the read reports
                pass
            finally:
                with self._idle:
                    self._busy -= 1
                    self._idle.notify_all()
            if self._closed:
                return
