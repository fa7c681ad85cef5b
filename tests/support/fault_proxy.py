"""A fault-injecting HTTP proxy on 127.0.0.1, between a reader and a real store.

`FaultProxy(upstream_port)` forwards every request to the store on that port
unchanged (the Host header included, so a signed request still verifies) and
answers with what the store said, or with a fault. Faults are the ones a
store's answers meet on the way to a reader:

- ``"reset"``: the headers and half the body, then a TCP reset;
- ``"short"``: the headers and half the body, then a clean close, so the
  body ends short of its Content-Length;
- ``"status"``: an error answer (`Fault.status`, 503 by default) with the
  store's own error document: S3's XML (``SlowDown`` for 503,
  ``InternalError`` otherwise) or, for a GCS JSON API path, GCS's JSON
  (``backendError``);
- ``"stall"``: nothing at all for `FaultProxy.stall_seconds`, then a close;
- ``"flip"``: the store's answer with one byte of its body flipped (see
  `flip_offset` for which);
- ``"whole"``: 200 with the whole object, no Content-Range, for a ranged GET;
- ``"other_range"``: 206 with another range of the same length (one byte on)
  and the Content-Range that says so. Both read the object's other bytes
  from the folder the store serves (`served`): a signed request cannot be
  sent on with another Range.

Which GETs meet a fault is decided by `Fault` rules set with `inject`: the
parts of a shard they apply to (its ``"tail"``: a range that reaches the
object's end, which is what a reader opening a shard fetches for its footer;
its ``"head"``: a short range from byte 0; its ``"body"``: any other range,
record chunks) and a schedule, every one of them deterministic: `every`
(every GET that matches), `first` (the first k GETs of each range),
`once_per_byte` (every GET none of whose bytes met a fault before, however
a reader splits or joins the ranges it asks for again) or `rate` (a seeded
share of GETs, decided by a hash of the seed, the object, the range and the
try, so that the same GETs meet the same faults whatever order the threads
take). Only GETs of the data shards (paths holding `shards`)
meet rules; control documents pass. What was injected is counted
(`injected`, `injected_at`), and every matching GET is logged (`log`).

The older per-request `plan` (a callable returning "pass", a status,
"drop", "truncate" or "stall" for request number n) still works, and runs
before the rules; the tests of retries and stalls use it.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import socket
import struct
import sys
import threading
import urllib.parse
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: Every kind of fault a `Fault` rule may inject.
KINDS = ("reset", "short", "status", "stall", "flip", "whole", "other_range")
#: The parts of a shard a rule may target.
PARTS = ("tail", "head", "body")
#: A range from byte 0 no longer than this is a shard's head (a reader asks for 64 bytes).
HEAD_LIMIT = 4096
#: Riegeli's block, and the header that opens each one.
BLOCK_SIZE = 1 << 16
BLOCK_HEADER_SIZE = 24

#: Decides what the proxy does with request number `n` (from 0) for `path`:
#: "pass", an HTTP status to answer with, "drop" (close before answering),
#: "truncate" (send half the body, then close) or "stall" (answer nothing for
#: `FaultProxy.stall_seconds`).
FaultPlan = Callable[[int, str, str], object]

_GCS_MEDIA = re.compile(r"/download/storage/v1/b/([^/]+)/o/(.+)")
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)")
_HOP_BY_HOP = {"transfer-encoding", "connection", "content-length", "keep-alive"}


@dataclass(frozen=True)
class Exchange:
    """One GET of a data shard, as a rule sees it once the store has answered."""

    path: str  # unquoted, without the query
    range: str | None  # the Range header as the reader sent it
    start: int  # the answer's first byte, last byte and the object's size
    end: int
    size: int
    part: str  # "tail", "head" or "body"
    tries: int  # GETs of this path and range before this one
    faults: int  # of them, how many met a fault
    touched: bool  # whether an earlier GET of this object that met a fault held any of these bytes

    def draw(self, seed: int, purpose: str = "") -> float:
        """A number in [0, 1) fixed by `seed`, `purpose`, the object, the range and the try."""
        key = f"{purpose}|{seed}|{self.path}|{self.range}|{self.tries}"
        digest = hashlib.sha256(key.encode()).digest()
        return int.from_bytes(digest[:8], "little") / 2.0**64


#: Whether an `Exchange` meets its rule's fault.
Schedule = Callable[[Exchange], bool]


def every() -> Schedule:
    """Every GET the rule matches."""
    return lambda exchange: True


def first(k: int) -> Schedule:
    """The first `k` GETs of each range (its later tries pass)."""
    return lambda exchange: exchange.tries < k


def once_per_byte() -> Schedule:
    """Every GET none of whose bytes met a fault before: each byte of an object meets one at most,
    however a reader splits or joins the ranges it asks for again."""
    return lambda exchange: not exchange.touched


def rate(share: float, seed: int, *, per_range: int = 2) -> Schedule:
    """A seeded `share` of GETs, at most `per_range` faults to each range (a transient fault ends)."""
    return lambda exchange: exchange.faults < per_range and exchange.draw(seed) < share


@dataclass(frozen=True)
class Fault:
    """A rule: GETs of `parts` of the objects whose path holds `where` that `when` picks meet one of
    `kinds` (chosen by a seeded draw); an error answer's status is `status`."""

    kinds: str | Sequence[str]
    when: Schedule = every()
    parts: Sequence[str] = PARTS
    where: str = ""
    status: int = 503
    seed: int = 0

    def __post_init__(self) -> None:
        kinds = (self.kinds,) if isinstance(self.kinds, str) else tuple(self.kinds)
        unknown = [k for k in kinds if k not in KINDS] + [p for p in self.parts if p not in PARTS]
        if unknown or not kinds:
            raise ValueError(f"unknown fault kinds or parts {unknown}: kinds are {KINDS}, parts {PARTS}")
        object.__setattr__(self, "kinds", kinds)

    def kind_for(self, exchange: Exchange) -> str | None:
        if exchange.part not in self.parts or self.where not in exchange.path or not self.when(exchange):
            return None
        kinds = self.kinds
        assert isinstance(kinds, tuple)
        return kinds[int(exchange.draw(self.seed, "kind") * len(kinds))]


def part_of(start: int, end: int, size: int) -> str:
    """Which part of a shard the bytes `start`..`end` of `size` are."""
    if end >= size - 1:
        return "tail"
    if start == 0 and end < HEAD_LIMIT:
        return "head"
    return "body"


def flip_offset(exchange: Exchange, length: int) -> int:
    """The byte of a body of `length` that a flip changes: one every reader checks.

    In a tail, the postscript chunk's header (its size field), at the start
    of the object's last block after its block header; in a head, the
    signature chunk's header; in a body (record chunks), its middle byte.
    """
    if exchange.part == "tail":
        last_block = (exchange.size - 1) // BLOCK_SIZE * BLOCK_SIZE
        offset = last_block + BLOCK_HEADER_SIZE + 8 - exchange.start
        if 0 <= offset < length:
            return offset
    if exchange.part == "head":
        return min(BLOCK_HEADER_SIZE + 8, length - 1)
    return length // 2


def error_document(path: str, status: int) -> tuple[str, bytes]:
    """(content type, body) of the error answer the store at `path` gives with `status`."""
    if path.startswith(("/download/storage/", "/storage/", "/upload/storage/")):
        reason = "backendError" if status >= 500 else "invalid"
        message = "injected by the test proxy"
        document = {
            "error": {"code": status, "message": message, "errors": [{"message": message, "reason": reason}]}
        }
        return "application/json; charset=UTF-8", json.dumps(document).encode()
    code = "SlowDown" if status == 503 else "InternalError"
    return "application/xml", (
        f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
        f"<Message>injected by the test proxy</Message></Error>"
    ).encode()


@dataclass
class _Answer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


class _Server(ThreadingHTTPServer):
    # A reader opens dozens of connections at once; the default backlog of 5
    # would drop their SYNs and stall each for a second, as no store does.
    request_queue_size = 128
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        # A reader that has what it needs (or knows an answer is wrong) may
        # close its end mid-answer; that is no error of the proxy's.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FaultProxy:
    """An HTTP proxy to the store on `upstream_port` that fails what `plan` and the rules pick."""

    def __init__(
        self,
        upstream_port: int,
        plan: FaultPlan | None = None,
        *,
        port: int = 0,
        served: str | os.PathLike[str] | None = None,
    ) -> None:
        self.upstream_port = upstream_port
        #: The folder the store serves (a bucket a folder), where "whole" and
        #: "other_range" answers read an object's other bytes.
        self.served = served
        self.plan: FaultPlan = plan or _passes
        #: Set to call `plan` with the request's Range header as a fourth argument.
        self.plan_sees_range = False
        self.stall_seconds = 3.0
        #: Answer headers not passed on (lower case), to play a server that sends
        #: fewer, for requests whose path holds `drop_headers_where`.
        self.drop_headers: set[str] = set()
        self.drop_headers_where = ""
        #: Paths (unquoted) whose GETs the rules apply to.
        self.shards = "objects/data/"
        self.seen: list[tuple[str, str, object]] = []
        self._rules: tuple[Fault, ...] = ()
        self._count = 0
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._reset_counts()
        self._server = _Server(("127.0.0.1", port), self._handler())
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    # -- what the tests set and read ----------------------------------------

    def inject(self, *rules: Fault) -> None:
        """Apply `rules` to the data shards' GETs from now on (the first that fires wins); counts restart."""
        with self._lock:
            self._rules = tuple(rules)
            self._reset_counts()

    def reset(self, plan: FaultPlan | None = None) -> None:
        """Pass everything (or follow `plan`), with every count and log started afresh."""
        with self._lock:
            self.plan = plan or _passes
            self.plan_sees_range = False
            self._count = 0
            self.seen = []
            self._rules = ()
            self._reset_counts()

    def _reset_counts(self) -> None:
        #: Faults injected, by kind, and by (kind, part).
        self.injected: Counter[str] = Counter()
        self.injected_at: Counter[tuple[str, str]] = Counter()
        #: GETs of the data shards, by part, faults included.
        self.gets: Counter[str] = Counter()
        #: (path, range, part, kind or None) of each GET of the data shards, in order.
        self.log: list[tuple[str, str | None, str, str | None]] = []
        self._tries: Counter[tuple[str, str | None]] = Counter()
        self._faults: Counter[tuple[str, str | None]] = Counter()
        self._faulted_spans: dict[str, list[tuple[int, int]]] = {}

    def gets_of(self, path_part: str, range_header: str | None = None) -> int:
        """GETs logged whose path holds `path_part` (and whose Range is `range_header`, if given)."""
        with self._lock:
            return sum(
                1
                for path, sent, _, _ in self.log
                if path_part in path and (range_header is None or sent == range_header)
            )

    def objects(self, path: str) -> bytes:
        """The bytes of the object at request path `path` (S3's path style or GCS's media path), as served."""
        if self.served is None:
            raise RuntimeError("wrong-range faults need the folder the store serves: FaultProxy(served=...)")
        found = _GCS_MEDIA.fullmatch(path)
        relative = "/".join(found.groups()) if found else path.lstrip("/")
        with open(os.path.join(self.served, relative), "rb") as stored:
            return stored.read()

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()

    # -- deciding -----------------------------------------------------------

    def _exchange(
        self, path: str, sent: str | None, answer: _Answer
    ) -> tuple[Exchange, Fault | None, str | None]:
        """The GET as a rule sees it, the rule that fires and its fault (None: it passes); counted."""
        start, end, size = _span(answer)
        key = (path, sent)
        with self._lock:
            spans = self._faulted_spans.setdefault(path, [])
            touched = any(start <= last and first_byte <= end for first_byte, last in spans)
            exchange = Exchange(
                path,
                sent,
                start,
                end,
                size,
                part_of(start, end, size),
                self._tries[key],
                self._faults[key],
                touched,
            )
            self._tries[key] += 1
            rule, kind = None, None
            if answer.status in (200, 206):  # the store's own error passes as it is
                fired = ((r, r.kind_for(exchange)) for r in self._rules)
                rule, kind = next(((r, k) for r, k in fired if k is not None), (None, None))
            self.gets[exchange.part] += 1
            self.log.append((path, sent, exchange.part, kind))
            if kind is not None:
                spans.append((start, end))
                self._faults[key] += 1
                self.injected[kind] += 1
                self.injected_at[kind, exchange.part] += 1
        return exchange, rule, kind

    # -- answering ----------------------------------------------------------

    def _upstream(self, method: str, path: str, headers: dict[str, str], body: bytes | None) -> _Answer:
        connection = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=30)
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            payload = response.read()
            answer_headers = response.getheaders()
            if method == "HEAD":
                # A HEAD answer's length is the object's, not its (empty) body's.
                answer_headers = [
                    *answer_headers,
                    ("X-Head-Length", response.getheader("Content-Length") or "0"),
                ]
            return _Answer(response.status, answer_headers, payload)
        finally:
            connection.close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                with proxy._lock:
                    number = proxy._count
                    proxy._count += 1
                if proxy.plan_sees_range:
                    action = proxy.plan(number, self.command, self.path, self.headers.get("Range"))  # type: ignore[call-arg]
                else:
                    action = proxy.plan(number, self.command, self.path)
                with proxy._lock:
                    proxy.seen.append((self.command, self.path, action))
                if action == "drop":
                    self._cut(reset=False)
                    return
                if action == "stall":
                    self._stall()
                    return
                if isinstance(action, int):
                    self._send(_Answer(action, *_error_parts(self.path, action)))
                    return
                headers = dict(self.headers.items())
                answer = proxy._upstream(self.command, self.path, headers, body)
                path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
                kind = "truncate" if action == "truncate" and self.command == "GET" else None
                if self.command == "GET" and proxy.shards in path:
                    exchange, rule, fault = proxy._exchange(path, self.headers.get("Range"), answer)
                    if rule is not None:
                        kind = fault
                        answer = self._faulty(rule, kind, exchange, answer)
                if kind == "stall":
                    self._stall()
                    return
                self._send(answer, kind)

            def _faulty(self, rule: Fault, kind: str | None, exchange: Exchange, answer: _Answer) -> _Answer:
                if kind == "status":
                    return _Answer(rule.status, *_error_parts(self.path, rule.status))
                if kind == "flip":
                    body = bytearray(answer.body)
                    body[flip_offset(exchange, len(body))] ^= 0xFF
                    return _Answer(answer.status, answer.headers, bytes(body))
                if kind in ("whole", "other_range"):
                    return self._wrong_range(kind, exchange, answer)
                return answer

            def _wrong_range(self, kind: str, exchange: Exchange, answer: _Answer) -> _Answer:
                # The store's own answer for the other bytes cannot be asked
                # for: the reader's signature covers its Range header.
                whole = proxy.objects(exchange.path)
                assert len(whole) == exchange.size, f"{exchange.path} is not what the store serves"
                kept = [(k, v) for k, v in answer.headers if k.lower() != "content-range"]
                if kind == "whole":
                    return _Answer(200, kept, whole)
                length = exchange.end - exchange.start + 1
                start = exchange.start + 1 if exchange.end + 1 < exchange.size else exchange.start - 1
                other = f"bytes {start}-{start + length - 1}/{exchange.size}"
                return _Answer(206, [*kept, ("Content-Range", other)], whole[start : start + length])

            def _send(self, answer: _Answer, kind: str | None = None) -> None:
                self.send_response(answer.status)
                announced = None
                for key, value in answer.headers:
                    lowered = key.lower()
                    if lowered == "x-head-length":
                        announced = value
                        continue
                    skipped = _HOP_BY_HOP | (
                        proxy.drop_headers if proxy.drop_headers_where in self.path else set()
                    )
                    if lowered not in skipped:
                        self.send_header(key, value)
                self.send_header("Content-Length", announced or str(len(answer.body)))
                self.end_headers()
                if self.command == "HEAD":
                    return
                if kind in ("reset", "short", "truncate") and len(answer.body) > 1:
                    self.wfile.write(answer.body[: len(answer.body) // 2])
                    self.wfile.flush()
                    self._cut(reset=kind == "reset")
                    return
                self.wfile.write(answer.body)

            def _stall(self) -> None:
                proxy._closing.wait(proxy.stall_seconds)
                self.close_connection = True

            def _cut(self, *, reset: bool) -> None:
                self.close_connection = True
                if reset:
                    # Linger 0: close sends a reset rather than the end of the stream.
                    # The socket closes now (its files close after this handler),
                    # before the server's shutdown would send the stream's end first.
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()
                    return
                self.connection.shutdown(socket.SHUT_RDWR)

            do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = _handle

        return Handler


def _passes(n: int, method: str, path: str) -> str:
    return "pass"


def _error_parts(path: str, status: int) -> tuple[list[tuple[str, str]], bytes]:
    content_type, body = error_document(urllib.parse.urlsplit(path).path, status)
    return [("Content-Type", content_type)], body


def _span(answer: _Answer) -> tuple[int, int, int]:
    """(first byte, last byte, object size) of a store's answer to a GET."""
    for key, value in answer.headers:
        if key.lower() == "content-range":
            found = _CONTENT_RANGE.fullmatch(value.strip())
            if found:
                start, end, size = (int(g) for g in found.groups())
                return start, end, size
    return 0, max(len(answer.body) - 1, 0), len(answer.body)
