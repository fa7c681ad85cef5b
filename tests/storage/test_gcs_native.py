"""gs:// datasets read natively, against fake-gcs-server (a GCS emulator) on 127.0.0.1.

signal_dataset opens the dataset through its own gs:// backend (control
documents through google-cloud-storage, which honours STORAGE_EMULATOR_HOST);
the shards are read by the native source with ranged GETs on the JSON API's
media endpoint. signal_dataset cannot read gs:// shards from an emulator (its
ArrayRecord reader goes to GCS itself), so batches are compared with the
local copy the emulator serves, read by signal_dataset.
"""

from __future__ import annotations

import pytest
import signal_dataset as sds
from gcs_server import ErrorStore
from s3_server import FaultProxy
from sds_factory import assert_batch

import sds_loader
from sds_loader.storage import sources
from sds_loader.storage.gcs_source import GcsOptions, GcsRangeSource, object_url, options_of

TARGETS = ("label", "snr_db")


def test_batches_are_native_and_match_the_local_copy(gcs_dataset):
    uri, local = gcs_dataset
    reader = sds_loader.BatchReader(uri, targets=TARGETS)
    assert reader.native_unavailable_reason is None
    indices = [40, 3, 3, 17, 0, 29, 11, 12, 47]
    assert_batch(local, reader.read(indices), indices, ("samples",), TARGETS)
    assert reader.stats.native_records == len(indices)
    assert reader.stats.fallback_records == 0
    assert reader.stats.fetch_requests > 0
    assert reader.stats.fetched_bytes > 0
    assert reader[17]["samples"].tobytes() == sds.open(local)[17]["samples"].data.tobytes()


def test_the_store_gives_the_endpoint_and_the_emulator_means_no_token(gcs_server, gcs_dataset):
    uri, _ = gcs_dataset
    dataset = sds.open(uri)
    options = options_of(dataset.object_store)
    assert options == GcsOptions(endpoint=gcs_server.url, anonymous=True)
    source = sources.for_shards(dataset, [uri + "/x"])
    assert isinstance(source, GcsRangeSource)
    assert object_url("https://storage.googleapis.com", "b", "a dir/o+1") == (
        "https://storage.googleapis.com/download/storage/v1/b/b/o/a%20dir%2Fo%2B1?alt=media"
    )


def test_a_missing_object_is_a_storage_error_naming_it(gcs_server, gcs_dataset):
    uri, _ = gcs_dataset
    missing = f"{uri}/objects/data/missing.array_record"
    source = GcsRangeSource([missing], GcsOptions(endpoint=gcs_server.url, anonymous=True))
    with pytest.raises(sds.StorageError, match=r"gs://sdsbucket/.*missing.array_record does not exist"):
        source.size(0)


@pytest.fixture
def proxy(gcs_server):
    proxy = FaultProxy(gcs_server.port)
    yield proxy
    proxy.close()


def through(proxy: FaultProxy, uri: str) -> sds_loader.BatchReader:
    """A reader whose store's client (and so whose shard reads) go through `proxy`."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage
    from signal_dataset.storage import GCSObjectStore

    client = storage.Client(
        project="test", credentials=AnonymousCredentials(), client_options={"api_endpoint": proxy.url}
    )
    reader = sds_loader.BatchReader(uri, targets=("label",), object_store=GCSObjectStore(client))
    return reader


@pytest.mark.parametrize("fault", [503, "drop", "truncate"])
def test_a_share_of_failed_requests_is_retried_to_exact_bytes(proxy, gcs_dataset, fault):
    uri, local = gcs_dataset
    reader = through(proxy, uri)
    source = reader.process_state().source
    assert isinstance(source, GcsRangeSource) and source.options.endpoint == proxy.url
    proxy.reset(lambda n, method, path: fault if n % 3 == 1 and "objects%2Fdata%2F" in path else "pass")
    indices = [7, 19, 20, 33, 45, 2]
    assert_batch(local, reader.read(indices), indices, ("samples",), ("label",))
    assert any(action == fault for *_, action in proxy.seen)
    if fault == 503:
        # A dropped connection may be retried by libcurl itself (a reused
        # connection found closed), and a dropped head costs no retry; an
        # error answer always costs one.
        assert source.counters.retries > 0
    assert reader.stats.native_records == len(indices)
    assert reader.stats.fallback_records == 0


@pytest.mark.parametrize(
    ("status", "reason", "message", "requests"),
    [
        (403, "forbidden", r"Google Cloud Storage refused to read gs://b/o \(forbidden\): .*no token", 1),
        (401, "required", r"Google Cloud Storage refused to read gs://b/o \(required\)", 1),
        (404, "notFound", r"gs://b/o does not exist", 1),
        (412, "conditionNotMet", r"gs://b/o was replaced", 1),
        (400, "invalid", r"reading gs://b/o failed: HTTP 400 invalid", 1),
        (429, "rateLimitExceeded", r"failed 2 times; the last attempt: HTTP 429 rateLimitExceeded", 2),
    ],
)
def test_json_error_documents_are_read_for_what_they_mean(status, reason, message, requests):
    store = ErrorStore(status, reason)
    try:
        options = GcsOptions(endpoint=store.url, anonymous=True, max_attempts=2)
        source = GcsRangeSource(["gs://b/o"], options, backoff_seconds=0.01, backoff_max_seconds=0.02)
        with pytest.raises(sds.StorageError, match=message):
            source.size(0)
        assert store.requests == requests + 1  # the tail, each attempt; the head, with the first
    finally:
        store.close()


def test_google_auth_credentials_are_sent_as_a_bearer_token(monkeypatch):
    import google.auth

    class Token:
        valid = True
        token = "ya29.test-token"

    scopes_seen: list[object] = []

    def default(scopes=None, **_):
        scopes_seen.append(scopes)
        return Token(), "project"

    monkeypatch.setattr(google.auth, "default", default)
    store = ErrorStore(403, "forbidden")
    try:
        source = GcsRangeSource(["gs://b/o"], GcsOptions(endpoint=store.url))
        with pytest.raises(
            sds.StorageError,
            match=r"refused to read gs://b/o \(forbidden\); check the credentials, their scopes",
        ):
            source.size(0)
        assert store.authorization == "Bearer ya29.test-token"
        assert scopes_seen == [["https://www.googleapis.com/auth/devstorage.read_only"]]
    finally:
        store.close()


def test_dataloader_with_forked_workers_reads_exactly(gcs_dataset):
    from torch_required import torch

    from torch.utils.data import DataLoader

    from sds_loader.torch import SDSTorchDataset, collate

    uri, local = gcs_dataset
    dataset = SDSTorchDataset(uri)
    dataset.__getitems__([0, 1])  # the parent reads first, so its connections exist at the fork
    loader = DataLoader(
        dataset,
        batch_size=8,
        shuffle=True,
        num_workers=2,
        multiprocessing_context="fork",
        collate_fn=collate,
        generator=torch.Generator().manual_seed(3),
    )
    reference = sds.open(local)
    expected = sorted(bytes(reference[i]["samples"].data.tobytes()) for i in range(len(reference)))
    got = sorted(row.numpy().tobytes() for batch in loader for row in batch["inputs"])
    assert got == expected
