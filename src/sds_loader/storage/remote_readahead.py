"""Readahead for shards in object storage, off the caller's thread.

`BatchReader.will_need` promises to return at once and never to raise. For
object storage, announcing records means opening their shards (footer
requests) and fetching their chunks, which takes round trips and can fail;
done on the caller's thread it would block a training loop on the network
and raise StorageError from a hint. So announcements are queued to a native
thread of the reader's own (`ShardSet.announce_records`): it opens the
shards together, turns the records into chunk ranges and hands those to the
byte source, whose own threads fetch them into its bounded readahead cache,
which later reads use. Every error is dropped: the read that needs the bytes
fetches them again and reports what goes wrong.

The queue and its thread are native rather than a Python thread: a Python
daemon thread inside a native call when the interpreter exits is ended by
the interpreter as it tries to take the GIL back, an exit through C++
frames that aborts the process (``terminate called without an active
exception``). A native thread holds no GIL and is simply gone with the
process.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sds_loader._native import ShardSet
    from sds_loader.storage.native_range import NativeRangeSource


class RemoteReadahead:
    """A reader's announcements for object storage, carried out natively."""

    def __init__(self, native: ShardSet, source: NativeRangeSource) -> None:
        self._native = native
        self._source = source
        self._closed = False

    def announce(self, files: np.ndarray, records: np.ndarray) -> None:
        """Queue `records` of `files` for readahead; returns at once, never raises."""
        if self._closed:
            return
        from sds_loader import _native

        try:
            _native.announce_records(self._native, files, records)
        except Exception:  # noqa: BLE001 - a hint never fails; the read reports
            pass

    def wait_idle(self, timeout: float) -> bool:
        """Wait until every queued announcement has been carried out (for tests); False on timeout."""
        deadline = time.monotonic() + timeout
        if not self._native.wait_announcements(timeout):
            return False
        # The source fetches what the announcements handed it on threads of its own.
        return self._source.wait_readahead(max(deadline - time.monotonic(), 0.0))

    def close(self) -> None:
        """Stop taking announcements."""
        self._closed = True
