"""Byte ranges of shards in S3, fetched natively, for the native core.

`S3RangeSource` is the Python side of the native core's fetch seam for
object storage. The requests themselves are issued and received by the
extension (`_native.S3Source`, libcurl's multi interface with its own SigV4
signing): many in flight from one thread, no Python and no GIL per request,
so a batch's ranged GETs cost tens of microseconds of CPU each rather than
the milliseconds a Python client spends signing and parsing. The core plans
which ranges a batch needs (footers once per shard, adjacent chunks as one
range), and the native source fills its buffers in place.

What stays in Python is what signal_dataset and boto3 already know, so that
a dataset reads from the same place, with the same identity, as
`signal_dataset.open` would:

- where each object lives: endpoint, region and addressing style come from
  signal_dataset's `S3Options`, turned into one URL per shard here;
- who is asking: credentials come from boto3's standard chain (environment,
  profile, container or instance role), resolved in this process and handed
  to the native source again before they expire.

What the native source guarantees (see csrc/sources/s3_source.h):

- Every range is the bytes asked for or an error: the answer's length,
  `Content-Range` and ETag are checked, and every GET after a shard's first
  carries `If-Match` with the object's ETag, so an object replaced while a
  reader is open fails instead of mixing two versions.
- Throttling, 5xx answers, stalls and dropped connections are retried with
  jittered exponential backoff, `S3Options.max_attempts` attempts in all, then
  raise `signal_dataset.StorageError` naming the object.
- `will_need` starts fetching the announced ranges on a thread of the
  extension into a bounded cache that later reads consume; it returns at once
  and never raises.
- Connections belong to one process: a forked child (a DataLoader worker)
  opens its own and never touches the parent's.
"""

from __future__ import annotations

import ipaddress
import os
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict
from urllib.parse import quote, urlsplit

from signal_dataset.storage.backends.s3 import S3Options
from signal_dataset.storage.paths import s3_parts

if TYPE_CHECKING:
    import boto3

    from sds_loader import _native

#: Requests kept in flight by one read. A request to a real object store costs
#: tens of milliseconds whatever its size, so a sparse batch is bound by how
#: many are in flight: 64 lets a batch of 64 scattered records go out in one
#: round trip. Connections cost the store little (S3 serves thousands of GETs
#: a second per prefix); each costs this process a socket and a little memory.
DEFAULT_REQUESTS_IN_FLIGHT = 64

#: Bytes read from the end of a shard by its first request. One suffix GET gives
#: the object's size (from `Content-Range`), its ETag, the postscript (the last
#: 64 KiB block) and the footer index before it (about 140 bytes a chunk: 36 kB
#: for 256 records, so up to some 460 chunks fit), so opening a shard costs
#: one round trip instead of a HEAD and two dependent GETs. A bigger footer
#: costs one more GET for the part before the tail, never the same bytes
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
#: boto3 refreshes expiring credentials (a role's) minutes before they
#: expire, so asking once a minute hands them on well in time.
CREDENTIALS_CHECK_SECONDS = 60.0


class _NativeSettings(TypedDict):
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


@dataclass(frozen=True)
class FetchCounters:
    """What one process's source has asked the store for so far.

    `requests` and `bytes` count answers that delivered their bytes (reads and
    readahead alike); `retries` counts attempts that failed and were tried
    again; `ahead_hits` counts ranges a read found already fetched ahead.
    """

    requests: int = 0
    bytes: int = 0
    retries: int = 0
    ahead_hits: int = 0


#: Every source of this process, so that a forked child can drop what it inherited.
_LIVE: weakref.WeakSet[S3RangeSource] = weakref.WeakSet()

#: boto3 sessions of this process, by profile. A session resolves the
#: credential chain once and refreshes what expires; making one per reader
#: would read the configuration files again each time.
_SESSIONS: dict[str | None, boto3.Session] = {}
_SESSIONS_LOCK = threading.Lock()


def _forget_parent_state() -> None:
    global _SESSIONS_LOCK
    # A parent thread may have held this lock, or a credential refresh lock, at the fork.
    _SESSIONS_LOCK = threading.Lock()
    _SESSIONS.clear()
    _ENDPOINTS.clear()
    for source in list(_LIVE):
        source._forget_parent()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_parent_state)


def _session(profile: str | None) -> boto3.Session:
    import boto3

    with _SESSIONS_LOCK:
        session = _SESSIONS.get(profile)
        if session is None:
            session = _SESSIONS[profile] = boto3.Session(profile_name=profile)
        return session


def region_of(options: S3Options) -> str:
    """The region requests are signed for: the settings', else the profile's or environment's."""
    if options.region_name:
        return options.region_name
    return _session(options.profile_name).region_name or "us-east-1"


#: The endpoint boto3 resolves by itself, by (profile, region).
_ENDPOINTS: dict[tuple[str | None, str], str] = {}


def endpoint_of(options: S3Options, region: str) -> str:
    """The endpoint requests go to: the settings', else the one boto3 resolves.

    boto3 also takes an endpoint from `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`
    and the profile's configuration, so its own client is asked (once per
    process, profile and region) rather than this module guessing AWS's.
    """
    if options.endpoint_url:
        return options.endpoint_url
    key = (options.profile_name, region)
    found = _ENDPOINTS.get(key)
    if found is None:
        client = _session(options.profile_name).client("s3", region_name=region)
        found = _ENDPOINTS[key] = str(client.meta.endpoint_url)
    return found


def object_url(options: S3Options, region: str, bucket: str, key: str) -> str:
    """The URL of `bucket`/`key`, addressed as boto3 would with these settings.

    Path style (`endpoint/bucket/key`) when the settings ask for it, when the
    endpoint is an IP address or localhost, or when the bucket name cannot be
    a host name; otherwise virtual-hosted style (`bucket.host/key`).
    """
    endpoint = endpoint_of(options, region).rstrip("/")
    parts = urlsplit(endpoint)
    host = parts.hostname or ""
    path_key = quote(key, safe="/-_.~")
    style = options.addressing_style or "auto"
    if style == "auto":
        try:
            ipaddress.ip_address(host)
            by_ip = True
        except ValueError:
            by_ip = host == "localhost"
        dns_safe = (
            bucket == bucket.lower() and "_" not in bucket and not (parts.scheme == "https" and "." in bucket)
        )
        style = "path" if by_ip or not dns_safe else "virtual"
    if style == "path":
        return f"{endpoint}/{quote(bucket, safe='')}/{path_key}"
    netloc = f"{bucket}.{parts.netloc}"
    base_path = parts.path.rstrip("/")
    return f"{parts.scheme}://{netloc}{base_path}/{path_key}"


class S3RangeSource:
    """Shard byte ranges from S3 (or any S3-compatible store) for the native core.

    `uris` are the shard objects in the core's file numbering. `options` are
    signal_dataset's own S3 settings (endpoint, region, profile, addressing
    style, `max_attempts`), normally those of the store the dataset was opened
    with. `requests_in_flight` bounds concurrent GETs per read.
    `backoff_seconds`/`backoff_max_seconds` shape the retry schedule;
    `connect_timeout` bounds a connection's setup and `read_timeout` how long
    an answer may stay silent. Tests shorten them; users rarely need to.
    """

    def __init__(
        self,
        uris: Sequence[str],
        options: S3Options | None = None,
        *,
        requests_in_flight: int = DEFAULT_REQUESTS_IN_FLIGHT,
        backoff_seconds: float = 0.1,
        backoff_max_seconds: float = 5.0,
        connect_timeout: float = 10.0,
        read_timeout: float = 30.0,
        readahead_bytes: int = READAHEAD_BYTES,
    ) -> None:
        if (
            isinstance(requests_in_flight, bool)
            or not isinstance(requests_in_flight, int)
            or requests_in_flight < 1
        ):
            raise ValueError(f"requests_in_flight must be a positive integer, not {requests_in_flight!r}")
        self._uris = tuple(uris)
        self._options = S3Options() if options is None else options
        self._settings = _NativeSettings(
            max_attempts=self._options.max_attempts,
            backoff_seconds=backoff_seconds,
            backoff_max_seconds=backoff_max_seconds,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            requests_in_flight=requests_in_flight,
            tail_bytes=TAIL_BYTES,
            head_bytes=HEAD_BYTES,
            readahead_bytes=readahead_bytes,
            part_bytes=PART_BYTES,
        )
        self._in_flight = requests_in_flight
        self._lock = threading.Lock()
        self._native: _native.S3Source | None = None
        #: botocore's credentials (refreshable ones refresh themselves), or None: unsigned.
        self._credentials: Any = None
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

    def wait_readahead(self, timeout: float) -> bool:
        """Wait until the ranges announced so far are fetched (for tests); False on timeout."""
        native = self._native
        return True if native is None else bool(native.wait_readahead(timeout))

    def open_shards(self, files: Sequence[int]) -> None:
        """Fetch the footers of `files` not yet open, all in flight at once."""
        self.native_source.open_shards(list(files))

    # -- bookkeeping -------------------------------------------------------

    @property
    def native_source(self) -> _native.S3Source:
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
                native = self._native
        if time.monotonic() >= self._next_check:
            self._hand_credentials(native)
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

    # -- internals ---------------------------------------------------------

    def _make_native(self) -> _native.S3Source:
        from sds_loader import _native

        region = region_of(self._options)
        urls = []
        for uri in self._uris:
            bucket, key = s3_parts(uri)
            urls.append(object_url(self._options, region, bucket, key))
        native = _native.S3Source(list(self._uris), urls, **self._settings)
        self._region = region
        self._hand_credentials(native)
        return native

    def _hand_credentials(self, native: _native.S3Source) -> None:
        """Give `native` the chain's current credentials (unsigned requests when there are none)."""
        self._next_check = time.monotonic() + CREDENTIALS_CHECK_SECONDS
        if self._credentials is None:
            self._credentials = _session(self._options.profile_name).get_credentials()
        credentials = self._credentials
        region = getattr(self, "_region", None) or region_of(self._options)
        if credentials is None:
            native.set_credentials(region, "", "", "")
            return
        # Refreshes credentials that are about to expire, as boto3's own clients do.
        frozen = credentials.get_frozen_credentials()
        native.set_credentials(region, frozen.access_key, frozen.secret_key, frozen.token or "")

    def _forget_parent(self) -> None:
        """In a forked child: the parent's credential objects may hold a lock a parent thread held.

        The native source itself is fork-safe (it forgets the parent's
        connections), so it is kept; its credentials are resolved again.
        """
        self._lock = threading.Lock()
        self._credentials = None
        self._next_check = 0.0
