"""An HTTP proxy on 127.0.0.1 that counts what a reader asks of a store, and can slow it down.

A simulation tool for benchmarks and tests, not part of the installed
package: benchmarks/remote_shaped.py puts it between `sds-loader bench`'s
readers and a store (a `WireCounter` of sds_loader.cli.bench.remote), and
the tests count traffic with it. It counts what each reader asks of the
store on the wire rather than assuming it: signal_dataset's reader has no counters, and an
assumption ("it stages whole shards") hides what it also reads (control
documents, HEADs) and would not notice if it changed. A reader is pointed at
the proxy by giving its S3 store the proxy's URL as endpoint; every request
is forwarded unchanged, the Host header included, so a signed request still
verifies. It counts requests and response body bytes (a GET's data, a HEAD's
none; chunked framing not included): a request when it arrives and a body's
bytes before they are sent, so once a reader has its answer the counts
include it.

A store on the same machine answers a ranged GET in about a millisecond and
at memory speed; a cloud store takes tens of milliseconds before the first
byte and delivers each connection's bytes at a finite rate. Which reader is
faster depends on exactly those two numbers (a reader that sends many small
requests pays the latency, one that stages whole shards pays the bandwidth),
so the proxy can also model the store a user has in mind:

- `latency_ms`: the first byte of each response is held until that long
  after its request arrived at the proxy (requests on several connections
  wait side by side, as they would in flight to a real store).
- `bandwidth` (bytes/s, per connection): after its first byte, each
  response's body is released no faster than this, each piece when its last
  byte would have arrived.

It runs in a child process of its own (one asyncio thread, this file
started by the interpreter), so that its work is not charged to the reading process whose
CPU time the bench measures; the counts live in a shared mapping. Plain HTTP
only: a proxy cannot read a TLS stream without terminating it, and a request
signed for 127.0.0.1 would not verify at a TLS endpoint under another name.
"""

from __future__ import annotations

import asyncio
import contextlib
import mmap
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse
from dataclasses import dataclass

#: Bytes read from the upstream and released to the client at a time.
PIECE = 64 * 1024
#: The longest a request head may be.
HEAD_LIMIT = 64 * 1024


@dataclass(frozen=True)
class Counts:
    requests: int = 0
    #: Bytes of response bodies (a GET's data; a HEAD's none), as a reader's own
    #: `stats.fetched_bytes` counts them.
    body_bytes: int = 0


class BenchProxy:
    """Forwards HTTP to `upstream` ("http://host:port"), adding latency and pacing, counting what passes.

    ``with BenchProxy("http://127.0.0.1:9000", latency_ms=20, bandwidth=100e6) as proxy:``
    then point a store's endpoint at ``proxy.url``. `bandwidth` None leaves
    the pace to the upstream.
    """

    def __init__(self, upstream: str, *, latency_ms: float = 0.0, bandwidth: float | None = None) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        if parsed.scheme != "http" or not parsed.hostname:
            raise ValueError(
                f"the bench proxy forwards plain HTTP, and {upstream!r} is not an http:// endpoint"
            )
        if latency_ms < 0:
            raise ValueError(f"latency_ms must be 0 or more, not {latency_ms}")
        if bandwidth is not None and bandwidth <= 0:
            raise ValueError(f"bandwidth must be positive (bytes/s), not {bandwidth}")
        self.latency_ms = float(latency_ms)
        self.bandwidth = None if bandwidth is None else float(bandwidth)
        # The counts: two int64 in a shared mapping the child writes and this process reads.
        self._counts_file = tempfile.TemporaryFile()
        self._counts_file.write(bytes(_COUNTS.size))
        self._counts_file.flush()
        self._counts = mmap.mmap(self._counts_file.fileno(), _COUNTS.size)
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(256)
        self.url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        # A process of its own (started afresh, not forked from this one's threads).
        with listener:
            self._process = subprocess.Popen(
                [
                    sys.executable,
                    os.path.abspath(__file__),
                    str(listener.fileno()),
                    str(self._counts_file.fileno()),
                    parsed.hostname,
                    str(parsed.port or 80),
                    repr(self.latency_ms / 1000.0),
                    repr(self.bandwidth or 0.0),
                ],
                pass_fds=(listener.fileno(), self._counts_file.fileno()),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
            )
        assert self._process.stdout is not None
        ready = self._process.stdout.readline()
        if ready.strip() != b"ready":
            self.close()
            raise RuntimeError(f"the bench proxy did not start (exit status {self._process.poll()})")

    def counts(self) -> Counts:
        requests, body_bytes = _COUNTS.unpack_from(self._counts, 0)
        return Counts(requests, body_bytes)

    def close(self) -> None:
        process = self._process
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
        self._counts.close()
        self._counts_file.close()

    def __enter__(self) -> BenchProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: The shared counts: requests, response body bytes.
_COUNTS = struct.Struct("<qq")


def _serve(listener_fd: int, counts_fd: int, host: str, port: int, latency: float, bandwidth: float) -> None:
    """The child process: serve connections on the inherited listener until terminated."""
    listener = socket.socket(fileno=listener_fd)
    counts = mmap.mmap(counts_fd, _COUNTS.size)
    shaper = _Shaper(host, port, latency, bandwidth or None, counts)

    parent = os.getppid()

    async def main() -> None:
        server = await asyncio.start_server(shaper.connection, sock=listener, limit=HEAD_LIMIT)
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        async with server:
            # Serve until terminated, or until the process that started this one is gone.
            while os.getppid() == parent:
                await asyncio.sleep(1.0)

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
        counts: mmap.mmap,
    ) -> None:
        self.host, self.port = host, port
        self.latency, self.bandwidth = latency, bandwidth
        self.counts = counts
        self.requests = self.body_bytes = 0

    def count(self, requests: int = 0, body_bytes: int = 0) -> None:
        # One thread writes; the reading process sees each 8-byte count whole.
        self.requests += requests
        self.body_bytes += body_bytes
        _COUNTS.pack_into(self.counts, 0, self.requests, self.body_bytes)

    async def connection(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                try:
                    head = await client_in.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                arrived = time.monotonic()
                self.count(requests=1)
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
                reused = upstream is not None
                try:
                    upstream, answer = await self._ask(upstream, head + body)
                except (asyncio.IncompleteReadError, ConnectionError):
                    if upstream is None or not reused:
                        raise
                    # The upstream closed a kept-alive connection while it sat
                    # idle: ask again on a new one, as an HTTP client would.
                    upstream[1].close()
                    upstream, answer = await self._ask(None, head + body)
                keep = await self._answer(method, upstream[0], answer, client_out, arrived)
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

    async def _ask(
        self, upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None, request: bytes
    ) -> tuple[tuple[asyncio.StreamReader, asyncio.StreamWriter], bytes]:
        """Send `request` upstream (on a new connection if None); (the connection, the answer's head)."""
        if upstream is None:
            upstream = await asyncio.open_connection(self.host, self.port, limit=HEAD_LIMIT)
        upstream[1].write(request)
        await upstream[1].drain()
        return upstream, await upstream[0].readuntil(b"\r\n\r\n")

    async def _answer(
        self,
        method: str,
        up_in: asyncio.StreamReader,
        head: bytes,
        out: asyncio.StreamWriter,
        arrived: float,
    ) -> bool:
        """Relay one response (its `head` already read), shaped; whether both connections stay open."""
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
            self.count(body_bytes=body)
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


if __name__ == "__main__":
    _serve(
        int(sys.argv[1]),
        int(sys.argv[2]),
        sys.argv[3],
        int(sys.argv[4]),
        float(sys.argv[5]),
        float(sys.argv[6]),
    )
