"""pytest fixtures for datasets in a real S3-compatible server on 127.0.0.1.

Import the fixtures into a test module (`from s3_fixtures import s3_server,
s3_dataset`). The server is moto's, started once per session; it is wired in
the way a user would configure signal_dataset: credentials from the standard
environment variables, the endpoint through an S3 backend registered in
signal_dataset's default registry.
"""

from __future__ import annotations

import functools
import os

import pytest
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


def upload_dataset(server: MotoServer, local_root: str | os.PathLike, name: str) -> str:
    return server.upload_tree(local_root, BUCKET, name)


@pytest.fixture(scope="session")
def s3_dataset(s3_server, tmp_path_factory) -> tuple[str, str]:
    """(s3:// URI, local copy) of 48 captures of 64 kB in 4 shards of 800 kB."""
    local = tmp_path_factory.mktemp("s3-local")
    write_dataset(local, 48, functools.partial(capture, samples=4096), records_per_shard=12)
    return upload_dataset(s3_server, local, "captures"), os.fspath(local)
