"""An HTTP proxy on 127.0.0.1 that makes a nearby store answer like a distant one.

A store on the same machine answers a ranged GET in about a millisecond and
at memory speed; a cloud store takes tens of milliseconds before the first
byte and delivers each connection's bytes at a finite rate. Which reader is
faster depends on exactly those two numbers (a reader that sends many small
requests pays the latency, one that stages whole shards pays the bandwidth),
so the remote bench can put this proxy between the readers and the endpoint
to model the store a user has in mind:

- `latency_ms`: the first byte of each response is held until that long
  after its request arrived at the proxy (requests on several connections
  wait side by side, as they would in flight to a real store).
- `bandwidth` (bytes/s, per connection): after its first byte, each
  response's body is released no faster than this, each piece when its last
  byte would have arrived.

Like the counting proxy, it counts requests and response body bytes (a GET's
data, a HEAD's none; chunked framing not included) and forwards every
request unchanged, the Host header included, so a signed request still
verifies. A request is counted when it arrives and a body's bytes before
they are sent, so once a reader has its answer the counts include it.

It runs in a child process of its own (one asyncio thread), so that its work
is not charged to the reading process whose CPU time the bench measures; the
counts live in shared memory. Plain HTTP only, for the reasons the counting
proxy gives.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import socket
import time
import urllib.parse
from multiprocessing.sharedctypes import Synchronized
from typing import Any

from sds_loader.cli.bench.counting_proxy import Counts

#: Bytes read from the upstream and released to the client at a time.
PIECE = 16 * 1024
#: The longest a request head may be.
HEAD_LIMIT = 64 * 1024


class ShapingProxy:
    """Forwards HTTP to `upstream` ("http://host:port"), adding latency and pacing, counting what passes.

    ``with ShapingProxy("http://127.0.0.1:9000", latency_ms=20, bandwidth=100e6) as proxy:``
    then point a store's endpoint at ``proxy.url``. `bandwidth` None leaves
    the pace to the upstream.
    """

    def __init__(self, upstream: str, *, latency_ms: float = 0.0, bandwidth: float | None = None) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        if parsed.scheme != "http" or not parsed.hostname:
            raise ValueError(
                f"the shaping proxy forwards plain HTTP, and {upstream!r} is not an http:// endpoint"
            )
        if latency_ms < 0:
            raise ValueError(f"latency_ms must be 0 or more, not {latency_ms}")
        if bandwidth is not None and bandwidth <= 0:
            raise ValueError(f"bandwidth must be positive (bytes/s), not {bandwidth}")
        self.latency_ms = float(latency_ms)
        self.bandwidth = None if bandwidth is None else float(bandwidth)
        context = multiprocessing.get_context("spawn")
        self._requests: Synchronized[int] = context.Value("q", 0)
        self._body_bytes: Synchronized[int] = context.Value("q", 0)
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(256)
        self.url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        ready = context.Event()
        self._process = context.Process(
            target=_serve,
            args=(
                listener,
                parsed.hostname,
                parsed.port or 80,
                self.latency_ms / 1000.0,
                self.bandwidth,
                self._requests,
                self._body_bytes,
                ready,
            ),
            name="sds-loader-shaping-proxy",
            daemon=True,
        )
        try:
            self._process.start()
        finally:
            # The child has its own copy of the listening socket.
            listener.close()
        if not ready.wait(timeout=60):
            self.close()
            raise RuntimeError("the shaping proxy did not start within 60 s")

    def counts(self) -> Counts:
        return Counts(int(self._requests.value), int(self._body_bytes.value))

    def close(self) -> None:
        process = self._process
        if process.pid is None:
            return
        process.terminate()
        process.join(timeout=10)
        if process.is_alive():
            process.kill()
            process.join(timeout=10)

    def __enter__(self) -> ShapingProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _serve(
    listener: socket.socket,
    host: str,
    port: int,
    latency: float,
    bandwidth: float | None,
    requests: Synchronized[int],
    body_bytes: Synchronized[int],
    ready: Any,
) -> None:
    """The child process: serve connections on `listener` until terminated."""
    shaper = _Shaper(host, port, latency, bandwidth, requests, body_bytes)

    async def main() -> None:
        server = await asyncio.start_server(shaper.connection, sock=listener, limit=HEAD_LIMIT)
        ready.set()
        async with server:
            await server.serve_forever()

    asyncio.run(main())


class _Closed(Exception):
    """The client or the upstream closed the connection."""


class _Shaper:
    def __init__(
        self,
        host: str,
        port: int,
        latency: float,
        bandwidth: float | None,
        requests: Synchronized[int],
        body_bytes: Synchronized[int],
    ) -> None:
        self.host, self.port = host, port
        self.latency, self.bandwidth = latency, bandwidth
        self.requests, self.body_bytes = requests, body_bytes

    async def connection(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                try:
                    head = await client_in.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                arrived = time.monotonic()
                with self.requests.get_lock():
                    self.requests.value += 1
                request_line, headers = _parse_head(head)
                method = request_line.split(" ", 1)[0]
                body = b""
                length = int(headers.get("content-length", "0") or 0)
                if headers.get("transfer-encoding", "").lower() not in ("", "identity"):
                    # Readers send no chunked request bodies; refuse rather than guess their end.
                    await _refuse(client_out, 501, "chunked request bodies are not forwarded")
                    return
                if length:
                    body = await client_in.readexactly(length)
                if upstream is None:
                    upstream = await asyncio.open_connection(self.host, self.port, limit=HEAD_LIMIT)
                up_in, up_out = upstream
                up_out.write(head + body)
                await up_out.drain()
                keep = await self._answer(method, up_in, client_out, arrived)
                if not keep or headers.get("connection", "").lower() == "close":
                    return
        except (_Closed, asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            if upstream is not None:
                upstream[1].close()
            client_out.close()
            with contextlib.suppress(Exception):
                await client_out.wait_closed()

    async def _answer(
        self, method: str, up_in: asyncio.StreamReader, out: asyncio.StreamWriter, arrived: float
    ) -> bool:
        """Relay one response, shaped; whether both connections stay open for another."""
        head = await up_in.readuntil(b"\r\n\r\n")
        status_line, headers = _parse_head(head)
        status = int(status_line.split(" ", 2)[1])
        first_byte = arrived + self.latency
        await _sleep_until(first_byte)
        out.write(head)
        await out.drain()
        pacer = _Pacer(first_byte, self.bandwidth)
        keep = headers.get("connection", "").lower() != "close"
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            return keep
        encoding = headers.get("transfer-encoding", "").lower()
        if encoding == "chunked":
            await self._relay_chunked(up_in, out, pacer)
            return keep
        if "content-length" in headers:
            await self._relay(up_in, out, pacer, int(headers["content-length"]))
            return keep
        await self._relay(up_in, out, pacer, None)  # to the end of the connection
        return False

    async def _relay(
        self, up_in: asyncio.StreamReader, out: asyncio.StreamWriter, pacer: _Pacer, length: int | None
    ) -> None:
        left = length
        while left is None or left > 0:
            piece = await up_in.read(PIECE if left is None else min(PIECE, left))
            if not piece:
                if left is None:
                    return
                raise _Closed()
            if left is not None:
                left -= len(piece)
            await self._send(out, pacer, piece, len(piece))

    async def _relay_chunked(
        self, up_in: asyncio.StreamReader, out: asyncio.StreamWriter, pacer: _Pacer
    ) -> None:
        while True:
            size_line = await up_in.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                trailer = await up_in.readuntil(b"\r\n")
                while trailer != b"\r\n":
                    size_line += trailer
                    trailer = await up_in.readuntil(b"\r\n")
                await self._send(out, pacer, size_line + trailer, 0)
                return
            data = await up_in.readexactly(size + 2)  # the chunk and its CRLF
            await self._send(out, pacer, size_line + data, size)

    async def _send(self, out: asyncio.StreamWriter, pacer: _Pacer, data: bytes, body: int) -> None:
        await pacer.wait_for(len(data))
        if body:
            with self.body_bytes.get_lock():
                self.body_bytes.value += body
        out.write(data)
        await out.drain()


class _Pacer:
    """Releases a response's bytes no faster than `bandwidth`, from its first byte on."""

    def __init__(self, start: float, bandwidth: float | None) -> None:
        self.start, self.bandwidth = start, bandwidth
        self.sent = 0

    async def wait_for(self, count: int) -> None:
        """Wait until the `count` bytes after those sent so far would have arrived."""
        self.sent += count
        if self.bandwidth is not None:
            await _sleep_until(self.start + self.sent / self.bandwidth)


async def _sleep_until(deadline: float) -> None:
    delay = deadline - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)


def _parse_head(head: bytes) -> tuple[str, dict[str, str]]:
    """(the first line, headers with lowercase names) of a request or response head."""
    lines = head.decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, separator, value = line.partition(":")
        if separator:
            headers[name.strip().lower()] = value.strip()
    return lines[0], headers


async def _refuse(out: asyncio.StreamWriter, status: int, reason: str) -> None:
    payload = reason.encode()
    out.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode()
        + payload
    )
    await out.drain()
