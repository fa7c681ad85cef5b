"""An HTTP proxy on 127.0.0.1 that counts the requests and bytes passing through it.

The remote bench counts what each reader asks of the store on the wire
rather than assuming it: signal_dataset's reader has no counters, and an
assumption ("it stages whole shards") hides what it also reads (control
documents, HEADs) and would not notice if it changed. A reader is pointed at
the proxy by giving its S3 store the proxy's URL as endpoint; every request
is forwarded unchanged (the Host header included, so a signed request still
verifies) to the real endpoint, and the answer sent back.

Plain HTTP only: a proxy cannot read a TLS stream without terminating it,
and a request signed for 127.0.0.1 would not verify at a TLS endpoint under
another name. Whole answers are buffered, so it suits a bench's batches,
not bulk transfer.
"""

from __future__ import annotations

import http.client
import threading
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: Headers that describe one hop's connection, not the message.
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "content-length"}


class _Server(ThreadingHTTPServer):
    # A reader opens dozens of connections at once; the default backlog of 5
    # would drop their SYNs and stall each for a second, as no store does.
    request_queue_size = 128


@dataclass(frozen=True)
class Counts:
    requests: int = 0
    #: Bytes of response bodies (a GET's data; a HEAD's none), as a reader's own
    #: `stats.fetched_bytes` counts them.
    body_bytes: int = 0


class CountingProxy:
    """Forwards HTTP to `upstream` ("http://host:port") and counts what passes."""

    def __init__(self, upstream: str) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        if parsed.scheme != "http" or not parsed.hostname:
            raise ValueError(
                f"the counting proxy forwards plain HTTP, and {upstream!r} is not an http:// endpoint"
            )
        self._host = parsed.hostname
        self._port = parsed.port or 80
        self._lock = threading.Lock()
        self._requests = 0
        self._body_bytes = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # quiet
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                upstream = http.client.HTTPConnection(proxy._host, proxy._port, timeout=60)
                try:
                    upstream.request(self.command, self.path, body=body, headers=dict(self.headers.items()))
                    response = upstream.getresponse()
                    payload = response.read()
                finally:
                    upstream.close()
                with proxy._lock:
                    proxy._requests += 1
                    proxy._body_bytes += len(payload)
                self.send_response(response.status)
                for key, value in response.getheaders():
                    if key.lower() not in _HOP_BY_HOP:
                        self.send_header(key, value)
                # A HEAD answer's length is the object's, not its (empty) body's.
                declared = response.getheader("Content-Length") if self.command == "HEAD" else None
                self.send_header("Content-Length", declared or str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _forward

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="counting-proxy", daemon=True)
        self._thread.start()

    def counts(self) -> Counts:
        with self._lock:
            return Counts(self._requests, self._body_bytes)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> CountingProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
