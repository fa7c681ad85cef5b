"""pytest fixtures for datasets in a real S3-compatible server on 127.0.0.1.

tests/conftest.py registers them for every test (a test takes `rclone_server`
or `rclone_dataset` as an argument); the helpers are imported by name. Both
servers are wired in the way a user would configure signal_dataset: credentials from the standard environment
variables, the endpoint through an S3 backend registered in signal_dataset's
default registry.

- `rclone_server` / `rclone_dataset`: ``rclone serve s3`` over a folder
  (tests/support/rclone_server.py), an S3 server in the way a real store is: it
  checks SigV4 signatures against a key pair, serves ranges from files and
  answers ranged GETs as it answers them (200 with a Content-Range). Its
  process and datasets last the session; the registry and credentials point
  at it for the duration of each test that asks for it, so that tests on
  moto in the same session keep their own.
- `s3_server` / `s3_dataset`: moto's server, for what rclone cannot do: it
  honours ``If-Match`` (412 on another ETag), which rclone 1.75 ignores, so
  the tests of a replaced object run on it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator

import pytest
import signal_dataset as sds
from rclone_server import CREDENTIALS as RCLONE_CREDENTIALS
from rclone_server import RcloneS3Server
from s3_server import CREDENTIALS, MotoServer
from sds_factory import capture, write_dataset
from signal_dataset.storage import default_registry
from signal_dataset.storage.backends.s3 import S3Options, s3_backend

BUCKET = "datasets"


def endpoint_options(url: str) -> S3Options:
    return S3Options(endpoint_url=url, region_name="us-east-1", addressing_style="path")


@pytest.fixture(scope="session")
def s3_server():
    server = MotoServer()
    with pytest.MonkeyPatch.context() as patch:
        for key, value in CREDENTIALS.items():
            patch.setenv(key, value)
        server.start()
        registry = default_registry()
        registry.register(s3_backend(endpoint_options(server.url)), replace=True)
        try:
            yield server
        finally:
            registry.register(s3_backend(), replace=True)
            server.stop()


def upload_dataset(server: MotoServer | RcloneS3Server, local_root: str | os.PathLike, name: str) -> str:
    return server.upload_tree(local_root, BUCKET, name)


@pytest.fixture(scope="session")
def s3_dataset(s3_server, tmp_path_factory) -> tuple[str, str]:
    """(s3:// URI, local copy) of 48 captures of 64 kB in 4 shards of 800 kB."""
    local = tmp_path_factory.mktemp("s3-local")
    write_dataset(local, 48, functools.partial(capture, samples=4096), records_per_shard=12)
    return upload_dataset(s3_server, local, "captures"), os.fspath(local)


#: The session's rclone server and the datasets it serves, made on first use.
_RCLONE: dict[str, object] = {}


def rclone_process(request: pytest.FixtureRequest) -> RcloneS3Server:
    """`rclone serve s3` for the session, started on first use and stopped when the session ends."""
    server = _RCLONE.get("server")
    if server is None:
        factory: pytest.TempPathFactory = request.getfixturevalue("tmp_path_factory")
        server = RcloneS3Server(factory.mktemp("rclone") / "root")
        server.start()
        request.config.add_cleanup(server.stop)
        _RCLONE["server"] = server
    assert isinstance(server, RcloneS3Server)
    return server


@pytest.fixture
def rclone_server(request, monkeypatch) -> Iterator[RcloneS3Server]:
    """The session's rclone server, with credentials and signal_dataset's registry pointing at it."""
    server = rclone_process(request)
    for key, value in RCLONE_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    registry = default_registry()
    previous = registry.backend_for("s3://any")
    registry.register(s3_backend(endpoint_options(server.url)), replace=True)
    try:
        yield server
    finally:
        registry.register(previous, replace=True)


@pytest.fixture
def rclone_dataset(rclone_server, tmp_path_factory) -> tuple[str, str]:
    """(s3:// URI, local copy) of 48 captures of 64 kB in 4 shards of 800 kB, served by rclone."""
    captures = _RCLONE.get("captures")
    if captures is None:
        local = tmp_path_factory.mktemp("rclone-local")
        write_dataset(local, 48, functools.partial(capture, samples=4096), records_per_shard=12)
        captures = _RCLONE["captures"] = (upload_dataset(rclone_server, local, "captures"), os.fspath(local))
    assert isinstance(captures, tuple)
    return captures


def shard_uris(uri: str) -> list[str]:
    dataset = sds.open(uri)
    return list(dict.fromkeys(i.filename for i in dataset.read_instructions(0, len(dataset))))


def local_bytes(uri: str, root_uri: str, local_root: str) -> bytes:
    with open(uri.replace(root_uri, local_root, 1), "rb") as handle:
        return handle.read()
