"""What every object store's native range source shares, whoever the store is.

`NativeRangeSource` is the Python side of the native core's fetch seam for
object storage (`_native.ObjectStoreSource`, libcurl's multi interface): many ranged
GETs in flight from one thread, no Python and no GIL per request. The core
plans which ranges a batch needs (footers once per shard, adjacent chunks as
one range), and the native source fills its buffers in place.

A store's subclass says only what is its own: where each object lives (one
URL per shard) and who is asking (credentials, handed to the native source
again before they expire). `S3RangeSource` (storage/s3_source.py) and
`GcsRangeSource` (storage/gcs_source.py) are the two.

What the native source guarantees (see csrc/sources/object_store_source.h):

- Every range is the bytes asked for or an error: the answer's length,
  `Content-Range` and the object's version (S3: ETag; GCS: generation) are
  checked, and every GET after a shard's first carries a precondition on that
  version, so an object replaced while a reader is open fails instead of
  mixing two versions.
- Throttling, 5xx answers, stalls and dropped connections are retried with
  jittered exponential backoff, `max_attempts` attempts in all, then raise
  `signal_dataset.StorageError` naming the object.
- `will_need` starts fetching the announced ranges on a thread of the
  extension into a bounded cache that later reads consume; it returns at once
  and never raises.
- Connections belong to one process: a forked child (a DataLoader worker)
  opens its own and never touches the parent's.
- With `cache` (storage/cache_settings.py), what it fetches is written to a
  node-local disk cache shared by every process given the same directory,
  and later reads of those bytes are served from there.
"""

from __future__ import annotations

import atexit
import multiprocessing.util
import os
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from sds_loader.storage.cache_settings import CacheSettings, warn_once
from sds_loader.storage.timeouts import checked_timeout

if TYPE_CHECKING:
    from sds_loader import _native

#: Requests kept in flight by one read. A request to a real object store costs
#: tens of milliseconds whatever its size, so a sparse batch is bound by how
#: many are in flight: 64 lets a batch of 64 scattered records go out in one
#: round trip. Connections cost the store little (S3 serves thousands of GETs
#: a second per prefix); each costs this process a socket and a little memory.
DEFAULT_REQUESTS_IN_FLIGHT = 64

#: Bytes read from the end of a shard by its first request. One suffix GET gives
#: the object's size (from `Content-Range`), its version, the postscript (the
#: last 64 KiB block) and the footer index before it (about 140 bytes a chunk:
#: 36 kB for 256 records, so up to some 460 chunks fit), so opening a shard
#: costs one round trip instead of a HEAD and two dependent GETs. A bigger
#: footer costs one more GET for the part before the tail, never the same bytes
#: twice; a smaller one costs the record bytes the tail reaches into, read
#: once per shard (and used, if a batch asks for those records).
TAIL_BYTES = 1 << 17

#: The file signature the core checks first; fetched beside the tail, in the
#: same round trip.
HEAD_BYTES = 64

#: Bytes of chunks fetched ahead (`will_need`) and kept until a read uses
#: them or newer ones push them out: a few batches' worth, whatever the
#: dataset, since a read that misses them only fetches them again.
READAHEAD_BYTES = 64 << 20

#: A range longer than this goes out as several GETs at once. A store paces
#: each connection (about 100 MB/s within a cloud region), so one GET of a
#: long run would be bound by one connection while the others sit idle.
PART_BYTES = 1 << 20

#: How often, at most, the credential chain is asked for fresh credentials.
#: boto3 and google-auth refresh expiring credentials minutes before they
#: expire, so asking once a minute hands them on well in time.
CREDENTIALS_CHECK_SECONDS = 60.0


class NativeSettings(TypedDict):
    """The native source's settings besides its URIs and URLs."""

    max_attempts: int
    backoff_seconds: float
    backoff_max_seconds: float
    connect_timeout: float
    read_timeout: float
    requests_in_flight: int
    tail_bytes: int
    head_bytes: int
    readahead_bytes: int
    part_bytes: int
    check_openings: bool


def native_settings(
    *,
    max_attempts: int,
    requests_in_flight: int,
    backoff_seconds: float,
    backoff_max_seconds: float,
    connect_timeout: float,
    read_timeout: float,
    readahead_bytes: int,
    check_openings: bool = False,
) -> NativeSettings:
    """The native source's settings, `requests_in_flight` and the timeouts checked."""
    positive = isinstance(requests_in_flight, int) and not isinstance(requests_in_flight, bool)
    if not positive or requests_in_flight < 1:
        raise ValueError(f"requests_in_flight must be a positive integer, not {requests_in_flight!r}")
    checked_timeout("connect_timeout", connect_timeout)
    checked_timeout("read_timeout", read_timeout)
    return NativeSettings(
        max_attempts=max_attempts,
        backoff_seconds=backoff_seconds,
        backoff_max_seconds=backoff_max_seconds,
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        requests_in_flight=requests_in_flight,
        tail_bytes=TAIL_BYTES,
        head_bytes=HEAD_BYTES,
        readahead_bytes=readahead_bytes,
        part_bytes=PART_BYTES,
        check_openings=check_openings,
    )


class CacheArguments(TypedDict, total=False):
    """The native source's node-cache arguments."""

    cache_dir: str
    cache_limit: int
    cache_floor: int


@dataclass(frozen=True)
class FetchCounters:
    """What one process's source has asked the store for so far.

    `requests` and `bytes` count answers that delivered their bytes (reads and
    readahead alike); `retries` counts attempts that failed and were tried
    again; `ahead_hits` counts ranges a read found already fetched ahead;
    `refetches` counts bytes fetched again because they failed a check (a
    chunk's hash, a footer that does not parse), apart from `retries`.
    """

    requests: int = 0
    bytes: int = 0
    retries: int = 0
    ahead_hits: int = 0
    refetches: int = 0


@dataclass(frozen=True)
class CacheCounters:
    """What one process's source has found in the node cache so far.

    `hits` and `misses` count ranges a read (or readahead) looked for whole:
    a miss fetched some of its bytes. `hit_bytes` were served from the cache;
    `stored_bytes` were written to it; `waits` counts ranges another process
    was fetching, waited for rather than fetched again; `dropped` counts
    damaged entries thrown away (and their bytes fetched again).
    """

    hits: int = 0
    misses: int = 0
    hit_bytes: int = 0
    stored_bytes: int = 0
    waits: int = 0
    dropped: int = 0


#: Every source of this process, so that a forked child can drop what it inherited.
_LIVE: weakref.WeakSet[NativeRangeSource] = weakref.WeakSet()


#: How long a process that ends waits for its node-cache writes.
FLUSH_SECONDS = 10.0


def _flush_node_caches() -> None:
    """Finish the node-cache writes still queued, so that what this process fetched stays fetched."""
    for source in list(_LIVE):
        native = source._native
        if native is not None and source._cache is not None:
            native.wait_writes(FLUSH_SECONDS)


def _forget_parent_sources() -> None:
    for source in list(_LIVE):
        source._forget_parent()
    # A DataLoader worker ends through multiprocessing, which runs its
    # finalizers but not atexit's.
    multiprocessing.util.Finalize(None, _flush_node_caches, exitpriority=100)


atexit.register(_flush_node_caches)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_parent_sources)


class NativeRangeSource:
    """Shard byte ranges from object storage for the native core; a store's subclass makes the native source.

    Subclasses implement `_make_native` (the URLs) and `_hand_credentials`
    (who is asking), and drop their credential objects in `_forget_parent`.
    """

    def __init__(
        self, uris: Sequence[str], settings: NativeSettings, cache: CacheSettings | None = None
    ) -> None:
        self._uris = tuple(uris)
        self._settings = settings
        self._cache = cache
        self._in_flight = settings["requests_in_flight"]
        self._lock = threading.Lock()
        self._native: _native.ObjectStoreSource | None = None
        #: The store's credential object, or None: not resolved yet (or none found).
        self._credentials: object = None
        self._next_check = 0.0
        _LIVE.add(self)

    # -- the RangeSource protocol ------------------------------------------

    def size(self, file: int) -> int:
        """Bytes in shard `file`, learnt with its tail and cached."""
        return self.native_source.size(file)

    def name(self, file: int) -> str:
        return self._uris[file]

    def fetch(self, requests: Sequence[tuple[int, int, memoryview]]) -> None:
        """Fill each `(file, offset, view)` with `len(view)` bytes of that shard.

        Every request has finished (written its view or failed) before this
        returns or raises, so nothing writes into a buffer its owner freed.
        """
        self.native_source.fetch(list(requests))

    def will_need(self, ranges: Sequence[tuple[int, int, int]]) -> None:
        """Start fetching `(file, offset, size)` ranges in the background; returns at once, never raises."""
        try:
            self.native_source.will_need([(int(f), int(o), int(s)) for f, o, s in ranges])
        except Exception:  # noqa: BLE001 - a hint never fails; the read reports
            pass

    def readahead_into_cache(self, into_cache: bool) -> None:
        """With a node cache, whether announcements fetch into it only, not into this process's memory too.

        For a process whose announcements serve the reads of others (the main
        process of a DataLoader with workers): the workers find the bytes in
        the node cache, and a copy in this process's readahead memory would
        never be read.
        """
        self.native_source.set_readahead_into_cache(into_cache)

    def wait_readahead(self, timeout: float) -> bool:
        """Wait until the ranges announced so far are fetched (for tests); False on timeout."""
        native = self._native
        return True if native is None else bool(native.wait_readahead(timeout))

    def open_shards(self, files: Sequence[int]) -> None:
        """Fetch the footers of `files` not yet open, all in flight at once."""
        self.native_source.open_shards(list(files))

    # -- bookkeeping -------------------------------------------------------

    @property
    def native_source(self) -> _native.ObjectStoreSource:
        """This process's native source, with credentials fresh enough for the next request.

        The native core reads through it directly (ShardSet takes it), so the
        reader asks for it before every read: that is when credentials that
        are about to expire are replaced.
        """
        native = self._native
        if native is None:
            with self._lock:
                if self._native is None:
                    self._native = self._make_native()
                    self._refresh(self._native)
                native = self._native
        if time.monotonic() >= self._next_check:
            self._refresh(native)
        return native

    @property
    def requests_in_flight(self) -> int:
        return self._in_flight

    @property
    def counters(self) -> FetchCounters:
        native = self._native
        if native is None:
            return FetchCounters()
        return FetchCounters(*native.counters)

    @property
    def cache_counters(self) -> CacheCounters:
        """The node cache's counters for this process (all 0 without a cache)."""
        native = self._native
        if native is None or self._cache is None:
            return CacheCounters()
        counters = native.cache_counters
        return CacheCounters() if counters is None else CacheCounters(*counters)

    def cache_usage(self) -> int:
        """Bytes the node cache's entries take now, whichever processes wrote them (0 without one)."""
        native = self._native
        return 0 if native is None else int(native.cache_usage())

    def check_cache(self) -> None:
        """Warn, once per process, when the node cache was turned off (reads go on without it)."""
        native = self._native
        if native is not None and self._cache is not None:
            warn_once(native.cache_warning, self._cache.directory)

    def close(self) -> None:
        """Drop this process's connections and cached bytes; a later read opens new ones."""
        native = self._native
        if native is not None:
            native.close()

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        state.update(_lock=None, _native=None, _credentials=None, _next_check=0.0)
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        _LIVE.add(self)

    # -- for subclasses ----------------------------------------------------

    def _make_native(self) -> _native.ObjectStoreSource:
        """The native source for this process: one URL per shard, no credentials yet."""
        raise NotImplementedError

    def _cache_arguments(self) -> CacheArguments:
        """The native source's node-cache arguments (none without a cache)."""
        if self._cache is None:
            return CacheArguments()
        return CacheArguments(
            cache_dir=self._cache.directory, cache_limit=self._cache.limit, cache_floor=self._cache.floor
        )

    def _hand_credentials(self, native: _native.ObjectStoreSource) -> None:
        """Give `native` the chain's current credentials (anonymous requests when there are none)."""
        raise NotImplementedError

    def _refresh(self, native: _native.ObjectStoreSource) -> None:
        self._next_check = time.monotonic() + CREDENTIALS_CHECK_SECONDS
        self._hand_credentials(native)

    def _forget_parent(self) -> None:
        """In a forked child: the parent's credential objects may hold a lock a parent thread held.

        The native source itself is fork-safe (it forgets the parent's
        connections), so it is kept; its credentials are resolved again.
        """
        self._lock = threading.Lock()
        self._credentials = None
        self._next_check = 0.0
