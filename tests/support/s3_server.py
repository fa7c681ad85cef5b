"""A real S3-compatible server on 127.0.0.1 for the tests, and a faulty proxy for it.

`MotoServer` runs moto's standalone server (`moto[server]`) as a child
process, so the tests talk HTTP to a separate process exactly as a reader
talks to a store, and can stop it and start it again on the same port.
`FaultProxy` (tests/support/fault_proxy.py, named here too) sits in front of
it, or of any store, and fails the requests a test picks, so that retry and
error paths run against real sockets rather than mocks.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import boto3
from botocore.config import Config
from fault_proxy import FaultPlan, FaultProxy  # noqa: F401 - the tests that import them from here

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
