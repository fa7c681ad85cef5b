"""Fixtures of the storage tests: a dataset in each real store, behind a fault-injecting proxy."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator

import pytest
from fault_proxy import FaultProxy
from fault_stores import ProxiedStore
from s3_fixtures import upload_dataset
from sds_factory import capture, write_dataset

#: The small dataset's URI in the session's rclone server, once uploaded.
_IN_RCLONE: dict[str, str] = {}


@pytest.fixture(scope="session")
def small_captures(tmp_path_factory) -> str:
    """A local dataset of 48 captures of 16 kB in 4 shards (the one the GCS emulator serves)."""
    local = tmp_path_factory.mktemp("small-captures")
    write_dataset(local, 48, functools.partial(capture, samples=2048), records_per_shard=12)
    return os.fspath(local)


@pytest.fixture
def small_s3_dataset(rclone_server, small_captures) -> tuple[str, str]:
    """(s3:// URI, local copy) of `small_captures`, served by rclone."""
    uri = _IN_RCLONE.get(rclone_server.url)
    if uri is None:
        uri = _IN_RCLONE[rclone_server.url] = upload_dataset(rclone_server, small_captures, "small-captures")
    return uri, small_captures


@pytest.fixture(params=["s3", "gcs"])
def proxied(request: pytest.FixtureRequest) -> Iterator[ProxiedStore]:
    """48 captures of 16 kB in 4 shards, in `rclone serve s3` or in fake-gcs-server, reached through
    a `FaultProxy`."""
    if request.param == "s3":
        server = request.getfixturevalue("rclone_server")
        uri, local = request.getfixturevalue("small_s3_dataset")
        served = server.root
    else:
        server = request.getfixturevalue("gcs_server")
        uri, local = request.getfixturevalue("gcs_dataset")
        served = server.data
    proxy = FaultProxy(server.port, served=served)
    try:
        yield ProxiedStore(request.param, uri, local, proxy)
    finally:
        proxy.close()
