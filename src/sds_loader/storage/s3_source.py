"""Byte ranges of shards in S3, fetched concurrently, for the native core.

`S3RangeSource` is the Python side of the native core's fetch seam: the core
plans which byte ranges a batch needs (footers once per shard, adjacent chunks
coalesced into one range) and hands them to `fetch` in one call, which issues
them as ranged GETs, many in flight, and fills the core's buffers in place.
Verification and decoding stay native and are the same as for local shards.

Why a thread pool over boto3 rather than an asyncio client or hand-written
HTTP: boto3 is what signal_dataset's S3 backend already uses, so endpoint,
region, addressing style and the credential chain behave exactly as they do
there; it releases the GIL while it waits on sockets, so a few dozen threads
keep that many requests in flight at little cost beside the network's.

What this module guarantees:

- Every range is the bytes asked for or an error, never fewer bytes or other
  bytes: the answer's length and `Content-Range` are checked, and every GET
  after the first carries `If-Match` with the object's ETag, so an object
  replaced while a reader is open fails instead of mixing two versions.
- Throttling, 5xx answers, timeouts and dropped connections are retried with
  jittered exponential backoff, `S3Options.max_attempts` attempts in all, then
  raise `signal_dataset.StorageError` naming the object. botocore's own retries
  are turned off so that this is the only bound; timeouts make every attempt
  finite, so no read hangs.
- The client and thread pool belong to one process: a forked child (a
  DataLoader worker) makes its own on first use and never touches the
  parent's sockets or locks, and `close` drops them so the next read makes new
  ones.
"""

from __future__ import annotations

import functools
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypedDict, TypeVar

import signal_dataset as sds
from signal_dataset.storage.backends.s3 import S3Options
from signal_dataset.storage.paths import s3_parts

if TYPE_CHECKING:
    import boto3

#: Requests kept in flight by one reader in one process. A request to a real
#: object store costs tens of milliseconds whatever its size, so a sparse batch
#: is bound by how many are in flight; past a few dozen per process the gain is
#: small and the store may throttle.
DEFAULT_REQUESTS_IN_FLIGHT = 32

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

#: Shards whose tails are kept. The core parses a footer once and caches the
#: index, so a tail is only needed again after the core's own cache evicts it.
TAIL_CACHE_SHARDS = 64

#: Bytes of chunks fetched ahead (`will_need`) and kept until a read uses
#: them or newer ones push them out: a few batches' worth, whatever the
#: dataset, since a read that misses them only fetches them again.
READAHEAD_BYTES = 32 << 20

#: HTTP statuses and S3 error codes that a later attempt may not see.
_RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
_RETRY_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestTimeout",
        "InternalError",
        "ServiceUnavailable",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
    }
)


@dataclass(frozen=True)
class FetchCounters:
    """What one process's source has asked the store for so far."""

    requests: int = 0
    bytes: int = 0
    retries: int = 0


#: Every source of this process, so that a forked child can drop what it inherited.
_LIVE: weakref.WeakSet[S3RangeSource] = weakref.WeakSet()


def _forget_parent_state() -> None:
    global _SESSIONS_LOCK
    # A parent thread may have held this lock, or a session's credential
    # refresh lock, at the fork: start both afresh.
    _SESSIONS_LOCK = threading.Lock()
    _SESSIONS.clear()
    for source in list(_LIVE):
        source._forget_parent()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_parent_state)


_T = TypeVar("_T")


class _Body(Protocol):
    """The body of a GetObject answer (botocore's StreamingBody)."""

    def read(self) -> bytes: ...
    def close(self) -> None: ...


class _GetObjectAnswer(TypedDict, total=False):
    """The keys of a GetObject answer this module reads."""

    Body: _Body
    ContentRange: str
    ETag: str


class _S3Client(Protocol):
    """What this module calls on a boto3 S3 client (boto3 ships no types)."""

    def get_object(self, *, Bucket: str, Key: str, Range: str, IfMatch: str = ...) -> _GetObjectAnswer: ...


class _Retry(Exception):
    """An attempt failed in a way the next attempt may not; carries the reason."""


@dataclass
class _Tail:
    size: int
    etag: str
    start: int
    data: bytes
    #: The shard's first bytes (empty when the tail holds them or they were not fetched).
    head: bytes = b""


class S3RangeSource:
    """Shard byte ranges from S3 (or any S3-compatible store) for the native core.

    `uris` are the shard objects in the core's file numbering. `options` are
    signal_dataset's own S3 settings (endpoint, region, profile, addressing
    style, `max_attempts`), normally those of the store the dataset was opened
    with. `requests_in_flight` bounds concurrent GETs per process.
    `backoff_seconds`/`backoff_max_seconds` shape the retry schedule and the
    timeouts bound each attempt; tests shorten them, users rarely need to.
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
    ) -> None:
        if (
            isinstance(requests_in_flight, bool)
            or not isinstance(requests_in_flight, int)
            or requests_in_flight < 1
        ):
            raise ValueError(f"requests_in_flight must be a positive integer, not {requests_in_flight!r}")
        self._uris = tuple(uris)
        self._parts = tuple(s3_parts(uri) for uri in self._uris)
        self._options = S3Options() if options is None else options
        self._in_flight = requests_in_flight
        self._backoff = sds.RetryPolicy(
            attempts=self._options.max_attempts, base_seconds=backoff_seconds, max_seconds=backoff_max_seconds
        )
        self._timeouts = (connect_timeout, read_timeout)
        self._lock = threading.Lock()
        self._tails: OrderedDict[int, _Tail] = OrderedDict()
        #: The ETag each shard had when first opened; kept when its tail is not,
        #: so a shard reopened after a replacement is refused, not mixed.
        self._etags: dict[int, str] = {}
        self._counters = FetchCounters()
        #: Ranges fetched ahead, by (file, offset): (ETag, bytes), oldest first.
        self._ahead: OrderedDict[tuple[int, int], tuple[str, bytes]] = OrderedDict()
        self._ahead_bytes = 0
        self._client: _S3Client | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._errors: tuple[type[BaseException], ...] = ()
        #: How many times close() ran; a request started before a close does not retry after it.
        self._closes = 0
        _LIVE.add(self)

    # -- the RangeSource protocol ------------------------------------------

    def size(self, file: int) -> int:
        """Bytes in shard `file`, learnt with its tail and cached."""
        return self._tail(file).size

    def name(self, file: int) -> str:
        return self._uris[file]

    def fetch(self, requests: Sequence[tuple[int, int, memoryview]]) -> None:
        """Fill each `(file, offset, view)` with `len(view)` bytes of that shard.

        Ranges inside a cached tail are copied from it; the rest go out as
        ranged GETs, up to `requests_in_flight` at a time. Every request has
        finished (written its view or failed) before this returns or raises,
        so no thread writes into a buffer its owner may have freed.
        """
        remote = []
        for file, offset, view in requests:
            view = memoryview(view).cast("B")
            left, etag = self._from_tail(file, offset, view)
            if len(left) and self._from_ahead(file, offset, left, etag):
                continue
            if len(left):
                remote.append((file, offset, left, etag))
        if not remote:
            return
        if len(remote) == 1:
            self._get_into(*remote[0])
            return
        pool = self._process()[1]
        futures: list[Future[None]] = []
        try:
            for request in remote:
                futures.append(pool.submit(self._get_into, *request))
        except RuntimeError as exc:  # the pool was shut down by close()
            for future in futures:
                future.cancel()
            wait(futures)
            raise sds.StorageError(
                f"the reader of {self._uris[remote[0][0]]} was closed during a read"
            ) from exc
        wait(futures, return_when="FIRST_EXCEPTION")
        failed = next((f for f in futures if f.done() and not f.cancelled() and f.exception()), None)
        if failed is not None:
            for future in futures:
                future.cancel()
        wait(futures)
        for future, request in zip(futures, remote, strict=True):
            try:
                future.result()
            except CancelledError:
                if failed is None:
                    raise sds.StorageError(
                        f"the reader of {self._uris[request[0]]} was closed during a read"
                    ) from None
            # Other exceptions propagate: the first in request order wins.

    def open_shards(self, files: Iterable[int]) -> None:
        """Open every shard of `files` this source has never opened, all at once.

        Opening a shard is one round trip (its tail and its first bytes, both
        in flight together), and the core opens the shards of a batch one
        after another as it plans it: a batch that touches eight new shards
        would wait for eight round trips. Called with the batch's shards
        first, it waits for one. A shard opened before and since evicted
        from the tail cache is reopened on demand, since the core may still
        hold its index.
        """
        with self._lock:
            new = [file for file in dict.fromkeys(files) if file not in self._etags]
        if new:
            self._open(new)

    def will_need(self, ranges: Sequence[tuple[int, int, int]]) -> None:
        """Fetch `(file, offset, size)` ranges ahead into a small cache `fetch` reads from.

        Called on the reader's readahead thread, never a reader's: it waits for
        the GETs. Never raises: a range that cannot be fetched now is fetched,
        or reported, by the read that needs it. Up to READAHEAD_BYTES are kept;
        a range larger than that is left to its read.
        """
        wanted = []
        with self._lock:
            for file, offset, size in ranges:
                if 0 < size <= READAHEAD_BYTES and (file, offset) not in self._ahead:
                    wanted.append((file, offset, size))
        if not wanted:
            return
        try:
            pool = self._process()[1]
            jobs = []
            for file, offset, size in wanted:
                etag = self._tail(file).etag
                buffer = bytearray(size)
                jobs.append(
                    (
                        file,
                        offset,
                        etag,
                        buffer,
                        pool.submit(self._get_into, file, offset, memoryview(buffer), etag),
                    )
                )
        except Exception:  # noqa: BLE001 - a hint never fails; the read reports
            return
        wait([job[-1] for job in jobs])
        for file, offset, etag, buffer, future in jobs:
            if future.cancelled() or future.exception() is not None:
                continue
            with self._lock:
                if (file, offset) in self._ahead:
                    continue
                self._ahead[(file, offset)] = (etag, bytes(buffer))
                self._ahead_bytes += len(buffer)
                while self._ahead_bytes > READAHEAD_BYTES:
                    _, (_, dropped) = self._ahead.popitem(last=False)
                    self._ahead_bytes -= len(dropped)

    # -- bookkeeping -------------------------------------------------------

    @property
    def requests_in_flight(self) -> int:
        return self._in_flight

    @property
    def counters(self) -> FetchCounters:
        return self._counters

    def close(self) -> None:
        """Drop this process's client and pool; a later read makes new ones."""
        with self._lock:
            pool, self._pool, self._client = self._pool, None, None
            self._tails.clear()
            self._ahead.clear()
            self._ahead_bytes = 0
            self._closes += 1
        if pool is not None:
            # Requests already running finish their current attempt and stop
            # (see _attempts); the caller of fetch waits for them, not close.
            pool.shutdown(wait=False, cancel_futures=True)

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        state.update(
            _lock=None,
            _client=None,
            _pool=None,
            _errors=(),
            _tails=OrderedDict(),
            _ahead=OrderedDict(),
            _ahead_bytes=0,
        )
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        _LIVE.add(self)

    # -- internals ---------------------------------------------------------

    def _process(self) -> tuple[_S3Client, ThreadPoolExecutor]:
        """This process's (client, pool), made on first use after a fork or close."""
        client, pool = self._client, self._pool
        if client is not None and pool is not None:
            return client, pool
        with self._lock:
            if self._client is None:
                self._client, self._errors = _make_client(self._options, self._in_flight, self._timeouts)
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._in_flight, thread_name_prefix="sds-loader-s3")
            return self._client, self._pool

    def _forget_parent(self) -> None:
        """In a forked child: the parent's sockets, threads and held locks are not ours.

        Dropped without being touched (closing a socket the parent still uses
        would break the parent's read; a lock held by a parent thread at the
        fork would never be released here).
        """
        self._lock = threading.Lock()
        self._client = self._pool = None
        self._tails = OrderedDict()
        self._ahead = OrderedDict()
        self._ahead_bytes = 0

    def _count(self, requests: int = 0, fetched: int = 0, retries: int = 0) -> None:
        with self._lock:
            c = self._counters
            self._counters = FetchCounters(c.requests + requests, c.bytes + fetched, c.retries + retries)

    def _tail(self, file: int) -> _Tail:
        with self._lock:
            tail = self._tails.get(file)
            if tail is not None:
                self._tails.move_to_end(file)
                return tail
        return self._open([file])[file]

    def _open(self, files: list[int]) -> dict[int, _Tail]:
        """Fetch the tails and heads of `files`, all in flight at once, and cache them."""
        pool = self._process()[1]
        heads: list[Future[tuple[str, bytes]]] = []
        tails: list[Future[_Tail]] = []
        try:
            for file in files:
                heads.append(pool.submit(self._attempts, file, functools.partial(self._get_head, file=file)))
            # The first tail is fetched on this thread: opening one shard costs no hand-off.
            for file in files[1:]:
                tails.append(pool.submit(self._attempts, file, functools.partial(self._get_tail, file=file)))
        except RuntimeError as exc:  # the pool was shut down by close()
            for future in heads + tails:
                future.cancel()
            wait(heads)
            wait(tails)
            raise sds.StorageError(f"the reader of {self._uris[files[0]]} was closed during a read") from exc
        try:
            opened = {files[0]: self._attempts(files[0], functools.partial(self._get_tail, file=files[0]))}
        finally:
            # Never leave a request running past this call.
            wait(heads)
            wait(tails)
        for file, pending in zip(files[1:], tails, strict=True):
            opened[file] = pending.result()  # the first failure, in the order of `files`, is raised
        for file, head in zip(files, heads, strict=True):
            if opened[file].start == 0:
                continue  # the tail holds the whole shard
            try:
                etag, data = head.result()
            except sds.StorageError:
                continue  # the core's own read of those bytes will retry and report it
            if etag == opened[file].etag:
                opened[file].head = data
        with self._lock:
            for file, tail in opened.items():
                if self._etags.setdefault(file, tail.etag) != tail.etag:
                    raise _replaced(self._uris[file])
                self._tails[file] = tail
                self._tails.move_to_end(file)
            while len(self._tails) > TAIL_CACHE_SHARDS:
                self._tails.popitem(last=False)
        return opened

    def _from_tail(self, file: int, offset: int, view: memoryview) -> tuple[memoryview, str]:
        """Fill what of `view` the cached head and tail hold.

        Returns the part still to fetch and the ETag to pin its GET to.
        """
        tail = self._tail(file)
        end = offset + len(view)
        if offset < 0 or end > tail.size:
            raise sds.StorageError(
                f"{self._uris[file]} holds {tail.size} bytes; bytes {offset}-{end} were asked for. "
                "The shard is shorter than its footer says: it was truncated or replaced"
            )
        if end <= len(tail.head):
            view[:] = tail.head[offset:end]
            return view[:0], tail.etag
        if end <= tail.start:
            return view, tail.etag
        split = max(tail.start - offset, 0)
        view[split:] = tail.data[offset + split - tail.start : end - tail.start]
        return view[:split], tail.etag

    def _from_ahead(self, file: int, offset: int, view: memoryview, etag: str) -> bool:
        """Fill `view` from a range fetched ahead that holds all of it; False if none does.

        Only a range fetched under the ETag the read is pinned to counts, so
        bytes of a replaced object are never mixed in.
        """
        end = offset + len(view)
        with self._lock:
            for (ahead_file, start), (ahead_etag, data) in reversed(self._ahead.items()):
                if ahead_file == file and start <= offset and end <= start + len(data) and ahead_etag == etag:
                    view[:] = memoryview(data)[offset - start : end - start]
                    return True
        return False

    def _get_tail(self, client: _S3Client, *, file: int) -> _Tail:
        bucket, key = self._parts[file]
        response = client.get_object(Bucket=bucket, Key=key, Range=f"bytes=-{TAIL_BYTES}")
        data = _read_body(response)
        start, end, size = _content_range(response, len(data))
        if end - start != len(data) or end != size:
            raise _Retry(f"asked for the last {TAIL_BYTES} bytes, got bytes {start}-{end} of {size}")
        self._count(requests=1, fetched=len(data))
        return _Tail(size=size, etag=str(response.get("ETag", "")), start=start, data=data)

    def _get_head(self, client: _S3Client, *, file: int) -> tuple[str, bytes]:
        bucket, key = self._parts[file]
        response = client.get_object(Bucket=bucket, Key=key, Range=f"bytes=0-{HEAD_BYTES - 1}")
        data = _read_body(response)
        start, end, _ = _content_range(response, len(data))
        if start != 0 or end - start != len(data):
            raise _Retry(f"asked for bytes 0-{HEAD_BYTES}, got bytes {start}-{end}")
        self._count(requests=1, fetched=len(data))
        return str(response.get("ETag", "")), data

    def _get_into(self, file: int, offset: int, view: memoryview, etag: str) -> None:
        bucket, key = self._parts[file]
        end = offset + len(view)

        def attempt(client: _S3Client) -> None:
            extra = {"IfMatch": etag} if etag else {}
            response = client.get_object(Bucket=bucket, Key=key, Range=f"bytes={offset}-{end - 1}", **extra)
            data = _read_body(response)
            start, stop, _ = _content_range(response, len(data))
            if (start, stop) != (offset, end) or len(data) != len(view):
                raise _Retry(f"asked for bytes {offset}-{end}, got {len(data)} bytes ({start}-{stop})")
            view[:] = data
            self._count(requests=1, fetched=len(data))

        self._attempts(file, attempt)

    def _attempts(self, file: int, attempt: Callable[[_S3Client], _T]) -> _T:
        """Run `attempt(client)` until it succeeds, a permanent error, or the bound."""
        uri = self._uris[file]
        attempts = self._options.max_attempts
        closes = self._closes
        reason: str | None
        for number in range(attempts):
            if self._closes != closes:
                raise sds.StorageError(f"the reader of {uri} was closed during a read")
            client = self._process()[0]
            try:
                return attempt(client)
            except _Retry as exc:
                reason = str(exc)
            except self._errors as exc:
                reason = _transient_reason(exc)
                if reason is None:
                    raise _permanent(exc, uri) from exc
            except (ConnectionError, TimeoutError) as exc:
                reason = f"{type(exc).__name__}: {exc}"
            if number + 1 < attempts:
                self._count(retries=1)
                time.sleep(self._backoff.delay(number))
        raise sds.StorageError(f"reading {uri} failed {attempts} times; the last attempt: {reason}")


#: boto3 sessions of this process, by (profile, region). Making a client from a
#: session that has made one before skips loading and parsing S3's service
#: model again, which costs more than a batch of requests to a nearby store.
_SESSIONS: dict[tuple[str | None, str | None], boto3.Session] = {}
_SESSIONS_LOCK = threading.Lock()


def _make_client(
    options: S3Options, in_flight: int, timeouts: tuple[float, float]
) -> tuple[_S3Client, tuple[type[BaseException], ...]]:
    import boto3
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError

    settings: dict[str, object] = {
        # This module's loop is the one retry bound; botocore's would multiply it.
        "retries": {"total_max_attempts": 1},
        "max_pool_connections": in_flight,
        "connect_timeout": timeouts[0],
        "read_timeout": timeouts[1],
    }
    if options.addressing_style is not None:
        settings["s3"] = {"addressing_style": options.addressing_style}
    # A session is not safe to make clients from in several threads at once.
    with _SESSIONS_LOCK:
        key = (options.profile_name, options.region_name)
        session = _SESSIONS.get(key)
        if session is None:
            session = _SESSIONS[key] = boto3.Session(
                profile_name=options.profile_name, region_name=options.region_name
            )
        client = session.client("s3", endpoint_url=options.endpoint_url, config=Config(**settings))
    return client, (ClientError, BotoCoreError)


def _read_body(response: _GetObjectAnswer) -> bytes:
    body = response["Body"]
    try:
        return body.read()
    finally:
        body.close()


def _content_range(response: _GetObjectAnswer, length: int) -> tuple[int, int, int]:
    """(start, end, object size) of an answer; a 200 without a range is the whole object."""
    header = response.get("ContentRange")
    if not header:
        return 0, length, length
    try:
        unit, _, rest = header.partition(" ")
        span, _, total = rest.partition("/")
        first, _, last = span.partition("-")
        if unit != "bytes":
            raise ValueError(header)
        return int(first), int(last) + 1, int(total)
    except ValueError:
        raise _Retry(f"unreadable Content-Range {header!r}") from None


def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return status if isinstance(status, int) else None
    return None


def _code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""


def _transient_reason(exc: BaseException) -> str | None:
    """Why `exc` is worth another attempt, or None if it is not."""
    from botocore.exceptions import ClientError, HTTPClientError, IncompleteReadError
    from botocore.exceptions import ConnectionError as BotoConnectionError

    if isinstance(exc, ClientError):
        status, code = _status(exc), _code(exc)
        if status in _RETRY_STATUSES or code in _RETRY_CODES:
            return f"HTTP {status} {code}".strip()
        return None
    # HTTPClientError covers a connection closed early, a read timeout and a
    # stream cut mid-body; ConnectionError covers refused and timed-out connects.
    if isinstance(exc, BotoConnectionError | HTTPClientError | IncompleteReadError):
        return f"{type(exc).__name__}: {exc}"
    return None


def _replaced(uri: str) -> sds.StorageError:
    return sds.StorageError(
        f"{uri} was replaced while this reader had it open; its bytes no longer match the "
        "footer already read. Open the dataset again"
    )


def _permanent(exc: BaseException, uri: str) -> sds.StorageError:
    status, code = _status(exc), _code(exc)
    if code in {"NoSuchKey", "NotFound", "404"} or status == 404:
        return sds.StorageError(
            f"{uri} does not exist. The dataset's manifest names this shard, so it was deleted "
            "after publication, or the reader is pointed at another bucket or endpoint"
        )
    if code == "NoSuchBucket":
        return sds.StorageError(f"the bucket of {uri} does not exist at this endpoint")
    if code in {"PreconditionFailed", "412"} or status == 412:
        return _replaced(uri)
    if code in {"InvalidRange", "416"} or status == 416:
        return sds.StorageError(f"{uri} is shorter than its footer says: it was truncated or replaced")
    if status == 403:
        return sds.StorageError(
            f"S3 refused to read {uri} ({code or 'HTTP 403'}); check the credentials, their "
            "expiry, the bucket policy and the system clock"
        )
    return sds.StorageError(f"reading {uri} failed: {code or exc}")
