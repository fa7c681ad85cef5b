"""A real S3-compatible server on 127.0.0.1 for the tests, and a faulty proxy for it.

`MotoServer` runs moto's standalone server (`moto[server]`) as a child
process, so the tests talk HTTP to a separate process exactly as a reader
talks to a store, and can stop it and start it again on the same port.
`FaultProxy` sits in front of it and answers a chosen share of requests with
500 or 503, drops connections before or during the answer, or stalls, so that
retry and error paths run against real sockets rather than mocks.
"""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import boto3
from botocore.config import Config

#: moto accepts any credentials; these keep boto3's chain from looking further.
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def stop_process(process: subprocess.Popen | None) -> None:
    """End a server the tests started: terminate it, and kill it if it lingers."""
    if process is None:
        return
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def wait_listening(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


class _Server(ThreadingHTTPServer):
    # A reader opens dozens of connections at once; the default backlog of 5
    # would drop their SYNs and stall each for a second, as no store does.
    request_queue_size = 128


class MotoServer:
    """moto's S3 server in a child process, on a fixed port across restarts."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen | None = None

    def start(self) -> None:
        env = {**os.environ, **CREDENTIALS}
        self._process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_listening(self.port)

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=30)
            self._process = None

    def client(self):
        return boto3.client(
            "s3",
            endpoint_url=self.url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            config=Config(s3={"addressing_style": "path"}),
        )

    def upload_tree(self, local_root: str | os.PathLike, bucket: str, prefix: str) -> str:
        """Copy every file under `local_root` to `s3://bucket/prefix/...`; return that URI."""
        client = self.client()
        try:
            client.create_bucket(Bucket=bucket)
        except client.exceptions.BucketAlreadyOwnedByYou:
            pass
        root = Path(local_root)
        for path in sorted(root.rglob("*")):
            if path.is_file():
                client.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(root).as_posix()}")
        return f"s3://{bucket}/{prefix}"


#: Decides what the proxy does with request number `n` (from 0) for `path`:
#: "pass", an HTTP status to answer with, "drop" (close before answering),
#: "truncate" (send half the body, then close) or "stall" (answer nothing for
#: `FaultProxy.stall_seconds`).
FaultPlan = Callable[[int, str, str], object]


class FaultProxy:
    """An HTTP proxy to `upstream` that fails the requests `plan` picks."""

    def __init__(self, upstream_port: int, plan: FaultPlan | None = None, *, port: int = 0) -> None:
        self.upstream_port = upstream_port
        self.plan: FaultPlan = plan or (lambda n, method, path: "pass")
        #: Set to call `plan` with the request's Range header as a fourth argument.
        self.plan_sees_range = False
        self.stall_seconds = 3.0
        #: Answer headers not passed on (lower case), to play a server that sends
        #: fewer, for requests whose path holds `drop_headers_where`.
        self.drop_headers: set[str] = set()
        self.drop_headers_where = ""
        self.seen: list[tuple[str, str, object]] = []
        self._count = 0
        self._lock = threading.Lock()
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
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if action == "stall":
                    time.sleep(proxy.stall_seconds)
                    self.close_connection = True
                    return
                if isinstance(action, int):
                    self._answer_error(action)
                    return
                upstream = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=30)
                try:
                    headers = {k: v for k, v in self.headers.items()}
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    response = upstream.getresponse()
                    payload = response.read()
                    self.send_response(response.status)
                    for key, value in response.getheaders():
                        skipped = {"transfer-encoding", "connection", "content-length"}
                        if proxy.drop_headers_where in self.path:
                            skipped |= proxy.drop_headers
                        if key.lower() not in skipped:
                            self.send_header(key, value)
                    # A HEAD answer's length is the object's, not its (empty) body's.
                    length = response.getheader("Content-Length") if self.command == "HEAD" else None
                    self.send_header("Content-Length", length or str(len(payload)))
                    self.end_headers()
                    if action == "truncate" and self.command == "GET" and len(payload) > 1:
                        self.wfile.write(payload[: len(payload) // 2])
                        self.wfile.flush()
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    if self.command != "HEAD":
                        self.wfile.write(payload)
                finally:
                    upstream.close()

            def _answer_error(self, status: int) -> None:
                code = "SlowDown" if status == 503 else "InternalError"
                payload = (
                    f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                    f"<Message>injected by the test proxy</Message></Error>"
                ).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = _handle

        self._server = _Server(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def reset(self, plan: FaultPlan | None = None) -> None:
        with self._lock:
            self.plan = plan or (lambda n, method, path: "pass")
            self.plan_sees_range = False
            self._count = 0
            self.seen = []

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
