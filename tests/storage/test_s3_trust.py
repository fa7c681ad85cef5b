"""Object storage is read only as signal_dataset would read it, against a real S3 server.

- A store passed with its own boto3 client is read through that client's
  endpoint with its credentials, in the reader's process and in forked
  DataLoader workers; the environment's endpoint receives nothing.
- A shard object of another size than its manifest declares is refused.
- A server that sends no ETag: a shard replaced between two reads (same size)
  is still detected, by its Last-Modified time.
- A read whose bytes were announced and then stalled waits no longer than
  its own attempts allow.
"""

from __future__ import annotations

import functools
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import signal_dataset as sds
from native_required import _native  # noqa: F401
from rclone_server import SECRET
from s3_fixtures import BUCKET, endpoint_options, rclone_process
from s3_server import FaultProxy
from sds_factory import capture, write_dataset
from signal_dataset.storage import S3ObjectStore, default_registry
from signal_dataset.storage.backends.s3 import S3Options, s3_backend

import sds_loader
from sds_loader.errors import CorruptShardError
from sds_loader.storage.s3_source import S3RangeSource


def local_rows(local: str, indices: list[int]) -> list[bytes]:
    dataset = sds.open(local)
    return [dataset[i]["samples"].data.tobytes() for i in indices]


@pytest.fixture
def elsewhere(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """The environment points at another endpoint, with other keys, than the store the test passes."""
    from sds_loader.storage import s3_source

    decoy = FaultProxy(1)  # records every request; nothing is served behind it
    # This process's credential chain is resolved once per profile: resolve it
    # afresh with the decoy environment, and again after it.
    s3_source._SESSIONS.clear()
    s3_source._ENDPOINTS.clear()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDECOYDECOYDECOY00")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "decoy-secret-that-must-not-be-used")
    monkeypatch.setenv("AWS_ENDPOINT_URL", decoy.url)
    registry = default_registry()
    previous = registry.backend_for("s3://any")
    registry.register(s3_backend(endpoint_options(decoy.url)), replace=True)
    try:
        yield decoy
    finally:
        registry.register(previous, replace=True)
        decoy.close()
        s3_source._SESSIONS.clear()
        s3_source._ENDPOINTS.clear()


@pytest.fixture
def own_client_dataset(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str, S3ObjectStore]:
    server = rclone_process(request)
    local = tmp_path / "local"
    write_dataset(local, 16, functools.partial(capture, samples=1024), records_per_shard=4)
    uri = server.upload_tree(local, BUCKET, f"own-client-{tmp_path.name}")
    # A client of the user's own: the server's endpoint and keys, whatever the environment says.
    return uri, os.fspath(local), S3ObjectStore(server.client())


def test_a_store_with_its_own_client_is_read_through_that_client(elsewhere, own_client_dataset) -> None:  # type: ignore[no-untyped-def]
    uri, local, store = own_client_dataset
    reader = sds_loader.BatchReader(uri, object_store=store, fields=("samples",), targets=("label",))
    assert reader.native_unavailable_reason is None
    indices = [15, 0, 7, 7, 3]
    batch = reader.read(indices)
    assert [row.tobytes() for row in batch["samples"]] == local_rows(local, indices)
    assert reader.object_store is store
    assert elsewhere.seen == [], "the environment's endpoint was sent requests"


def test_forked_workers_use_the_store_as_given(elsewhere, own_client_dataset) -> None:  # type: ignore[no-untyped-def]
    from torch_required import torch  # noqa: F401

    from torch.utils.data import DataLoader

    from sds_loader.torch import SDSTorchDataset, collate

    uri, local, store = own_client_dataset
    dataset = SDSTorchDataset(uri, object_store=store)
    dataset.__getitems__([0])
    loader = DataLoader(
        dataset, batch_size=4, num_workers=2, multiprocessing_context="fork", collate_fn=collate
    )
    got = [row.numpy().tobytes() for batch in loader for row in batch["inputs"]]
    assert got == local_rows(local, list(range(16)))
    assert elsewhere.seen == [], "a worker sent requests to the environment's endpoint"


def test_a_store_with_its_own_client_is_not_pickled_with_its_keys(elsewhere, own_client_dataset) -> None:  # type: ignore[no-untyped-def]
    import pickle

    uri, _, store = own_client_dataset
    reader = sds_loader.BatchReader(uri, object_store=store)
    with pytest.raises(ValueError, match="wraps a client of its own") as raised:
        pickle.dumps(reader)
    assert SECRET not in str(raised.value)


def test_a_shard_object_of_another_size_than_declared_is_refused(rclone_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    local = tmp_path / "local"
    write_dataset(local, 8, functools.partial(capture, samples=1024), records_per_shard=4)
    larger = tmp_path / "larger"
    write_dataset(larger, 8, functools.partial(capture, samples=8192), records_per_shard=8)
    uri = rclone_server.upload_tree(local, BUCKET, f"resized-{tmp_path.name}")
    served = sorted(
        rclone_server.path(BUCKET, f"resized-{tmp_path.name}").glob("objects/data/*/*.arrayrecord")
    )
    declared = served[0].stat().st_size
    shutil.copyfile(next(larger.glob("objects/data/*/*.arrayrecord")), served[0])
    assert served[0].stat().st_size != declared
    with pytest.raises(CorruptShardError, match=f"where the manifest that names it declares {declared}"):
        sds_loader.BatchReader(uri, fields=("samples",)).read(np.arange(8))


def test_a_replacement_is_detected_without_etags(rclone_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    local = tmp_path / "local"
    # Records of 64 kB: the shard is longer than the tail its first request reads.
    write_dataset(local, 8, functools.partial(capture, samples=8192), records_per_shard=8)
    other = tmp_path / "other"
    write_dataset(other, 8, lambda i: capture(i + 500, samples=8192), records_per_shard=8)
    prefix = f"no-etag-{tmp_path.name}"
    uri = rclone_server.upload_tree(local, BUCKET, prefix)
    proxy = FaultProxy(rclone_server.port)
    # signal_dataset requires ETags of control documents; shards come without.
    proxy.drop_headers = {"etag"}
    proxy.drop_headers_where = "/objects/data/"
    try:
        store = S3ObjectStore(options=endpoint_options(proxy.url))
        reader = sds_loader.BatchReader(uri, object_store=store, fields=("samples",))
        assert [r.tobytes() for r in reader.read([0, 1])["samples"]] == local_rows(str(local), [0, 1])
        assert all(action == "pass" for _, _, action in proxy.seen)
        served = next(rclone_server.path(BUCKET, prefix).glob("objects/data/*/*.arrayrecord"))
        replacement = next(other.glob("objects/data/*/*.arrayrecord"))
        assert replacement.stat().st_size == served.stat().st_size
        time.sleep(1.1)  # Last-Modified has a resolution of one second
        shutil.copyfile(replacement, served)
        with pytest.raises(sds.StorageError, match="replaced"):
            reader.read([2, 3])
    finally:
        proxy.close()


def test_a_stalled_announcement_counts_against_the_reads_own_attempts(rclone_server, rclone_dataset) -> None:  # type: ignore[no-untyped-def]
    uri, _ = rclone_dataset
    proxy = FaultProxy(rclone_server.port)
    proxy.stall_seconds = 20.0
    timeout = 2.0
    try:
        shard = sds.open(uri).read_instructions(0, 1)[0].filename
        options = S3Options(
            endpoint_url=proxy.url, region_name="us-east-1", addressing_style="path", max_attempts=1
        )
        source = S3RangeSource([shard], options, read_timeout=timeout, connect_timeout=timeout)
        size = source.size(0)  # the shard is open: its tail came before the store stalled
        proxy.reset(lambda n, method, path: "stall")
        source.will_need([(0, 0, 4096)])
        buffer = bytearray(4096)
        started = time.monotonic()
        with pytest.raises(sds.StorageError, match="stalled"):
            source.fetch([(0, 0, memoryview(buffer))])
        elapsed = time.monotonic() - started
        # One attempt's worth: the wait for the announcement. Waiting for it
        # and then making an attempt of its own would take twice as long.
        assert elapsed < 1.6 * timeout, f"the read took {elapsed:.1f} s with max_attempts=1"
        assert size > 4096
        source.close()
    finally:
        proxy.close()


class _Concatenated:
    """Two views' entries one after the other: what `publish_reference` publishes."""

    def __init__(self, first: sds.DatasetView, second: sds.DatasetView) -> None:
        self._parts = (first, second)

    def __len__(self) -> int:
        return sum(len(part) for part in self._parts)

    def _entries_range(self, start: int, stop: int) -> tuple:  # type: ignore[type-arg]
        import dataclasses

        entries = []
        offset = 0
        for part in self._parts:
            low, high = max(start - offset, 0), min(stop - offset, len(part))
            if low < high:
                for entry in part._entries_range(low, high):
                    entries.append(dataclasses.replace(entry, first_ordinal=entry.first_ordinal + offset))
            offset += len(part)
        return tuple(entries)


def test_shards_in_several_stores_are_read_by_signal_dataset(s3_server, s3_dataset, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from signal_dataset.dataset.references import publish_reference

    uri, _ = s3_dataset
    local = tmp_path / "local"
    write_dataset(local, 8, functools.partial(capture, samples=4096), records_per_shard=4)
    # A view in S3 whose manifests name shards in S3 and on the local disk.
    view = f"{uri.rstrip('/')}-mixed-{tmp_path.name}"
    both = _Concatenated(sds.open(uri).select([3, 40]), sds.open(os.fspath(local)).select([6, 1]))
    publish_reference(both, view, dataset_id="mixed", snapshot_id="v1")
    reader = sds_loader.BatchReader(view, fields=("samples",))
    assert "several stores" in (reader.native_unavailable_reason or "")
    batch = reader.read([3, 0, 2])
    opened = sds.open(view)
    assert [row.tobytes() for row in batch["samples"]] == [
        opened[i]["samples"].data.tobytes() for i in (3, 0, 2)
    ]
    assert reader.stats.fallback_records == 3
