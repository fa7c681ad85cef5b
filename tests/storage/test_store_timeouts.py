"""The connect and read timeouts of object storage, set from `BatchReader` and `SDSTorchDataset`.

Each bounds one attempt of a GET (`max_attempts` attempts in all): a store
that stalls costs `read_timeout` seconds a try, as the user chose, rather
than 30. Bad values are refused before anything is opened, naming the
argument. Against the real rclone S3 server behind the fault-injecting
proxy, which here answers nothing for longer than the timeout.
"""

from __future__ import annotations

from torch_required import torch  # noqa: F401

import dataclasses
import math

import pytest
from fault_proxy import Fault, FaultProxy, every
from native_required import _native  # noqa: F401
from s3_fixtures import endpoint_options
from signal_dataset import StorageError
from signal_dataset.storage import S3ObjectStore

import sds_loader
from sds_loader.torch import SDSTorchDataset

BAD = [0, -1.0, math.nan, math.inf, True, "5", [1.0]]


@pytest.mark.parametrize("argument", ["connect_timeout", "read_timeout"])
@pytest.mark.parametrize("value", BAD, ids=repr)
def test_a_bad_timeout_is_refused_naming_it(argument, value):
    with pytest.raises(ValueError, match=f"{argument} must be a number of seconds above 0"):
        sds_loader.BatchReader("s3://nowhere/captures", **{argument: value})
    with pytest.raises(ValueError, match=f"{argument} must be a number of seconds above 0"):
        SDSTorchDataset("s3://nowhere/captures", **{argument: value})


@pytest.fixture
def stalling(rclone_server):
    proxy = FaultProxy(rclone_server.port, served=rclone_server.root)
    proxy.stall_seconds = 20.0
    try:
        yield proxy
    finally:
        proxy.close()


def one_attempt(proxy: FaultProxy) -> S3ObjectStore:
    return S3ObjectStore(options=dataclasses.replace(endpoint_options(proxy.url), max_attempts=1))


def test_read_timeout_bounds_an_attempt_of_a_batch_reader(stalling, rclone_dataset):
    uri, _ = rclone_dataset
    reader = sds_loader.BatchReader(
        uri, fields=("samples",), object_store=one_attempt(stalling), read_timeout=0.5, connect_timeout=2.5
    )
    source = reader.opened_state().source
    assert source is not None and source._settings["connect_timeout"] == 2.5
    stalling.inject(Fault("stall", every(), parts=("body",)))
    with pytest.raises(StorageError, match=r"no answer for 0\.5"):
        reader.read([13])
    reader.close()


def test_read_timeout_bounds_an_attempt_of_a_torch_dataset(stalling, rclone_dataset):
    uri, _ = rclone_dataset
    dataset = SDSTorchDataset(uri, object_store=one_attempt(stalling), read_timeout=0.5)
    stalling.inject(Fault("stall", every(), parts=("body",)))
    with pytest.raises(StorageError, match=r"no answer for 0\.5"):
        dataset.__getitems__([13])
