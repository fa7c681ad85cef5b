"""Fixtures of the storage tests: a dataset in each real store, behind a fault-injecting proxy."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fault_proxy import FaultProxy
from fault_stores import ProxiedStore


@pytest.fixture(params=["s3", "gcs"])
def proxied(request: pytest.FixtureRequest) -> Iterator[ProxiedStore]:
    """48 captures in 4 shards, in `rclone serve s3` or in fake-gcs-server, reached through a `FaultProxy`."""
    if request.param == "s3":
        server = request.getfixturevalue("rclone_server")
        uri, local = request.getfixturevalue("rclone_dataset")
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
