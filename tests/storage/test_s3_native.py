"""Datasets in S3 are read natively, byte for byte as signal_dataset reads them.

Against `rclone serve s3` on 127.0.0.1: BatchReader and SDSTorchDataset on an
s3:// root, `stats` showing native reads and what was fetched, DataLoader
workers (forked and spawned), faults from a proxy that fails a share of
requests or all of them, and a shard missing from the bucket.
"""

from __future__ import annotations

import functools
import os
import threading

import numpy as np
import pytest
import signal_dataset as sds
from s3_fixtures import BUCKET, endpoint_options, upload_dataset
from s3_server import FaultProxy
from sds_factory import assert_batch, capture, read_chunks, write_dataset
from signal_dataset.storage import S3ObjectStore

import sds_loader
from sds_loader import dataset as addressing
from sds_loader.storage.s3_source import HEAD_BYTES

TARGETS = ("label", "snr_db")


def test_batches_match_signal_dataset_and_are_native(rclone_dataset):
    uri, _ = rclone_dataset
    reader = sds_loader.BatchReader(uri, targets=TARGETS)
    assert reader.native_unavailable_reason is None
    indices = [40, 3, 3, -1, 17, 0, 29, 11, 12]
    batch = reader.read(indices)
    assert_batch(uri, batch, [i % 48 for i in indices], ("samples",), TARGETS)
    assert reader.stats.native_records == len(indices)
    assert reader.stats.fallback_records == 0
    assert reader.stats.fetch_requests > 0
    single = reader[17]
    assert single["samples"].tobytes() == sds.open(uri)[17]["samples"].data.tobytes()


def test_a_batch_fetches_only_its_records_once_footers_are_cached(rclone_dataset):
    uri, local = rclone_dataset
    reader = sds_loader.BatchReader(uri, targets=("label",))
    reader.read(list(range(0, 48, 12)))  # opens every shard: tails, signatures
    before = reader.stats.fetched_bytes, reader.stats.fetch_requests
    indices = [1, 2, 3, 14, 30, 31]  # runs 1-3 and 30-31 are adjacent chunks
    reader.read(indices)
    fetched = reader.stats.fetched_bytes - before[0]
    requests = reader.stats.fetch_requests - before[1]
    own = _own_bytes(uri, local, indices)
    assert own <= fetched <= 2 * own
    # Adjacent chunks are one range: three runs, three GETs.
    assert requests == 3


def test_object_store_passed_through(rclone_server, rclone_dataset):
    uri, _ = rclone_dataset
    store = S3ObjectStore(options=endpoint_options(rclone_server.url))
    reader = sds_loader.BatchReader(uri, targets=("label",), object_store=store, requests_in_flight=2)
    assert_batch(uri, reader.read([5, 6, 47]), [5, 6, 47], ("samples",), ("label",))
    assert reader.stats.native_records == 3


def test_dataloader_forked_persistent_workers(rclone_dataset):
    from torch_required import torch

    from torch.utils.data import DataLoader

    from sds_loader.torch import SDSTorchDataset, collate

    uri, _ = rclone_dataset
    dataset = SDSTorchDataset(uri)
    dataset.__getitems__([0, 1])  # the parent reads first, as a user who looks at a record does
    loader = DataLoader(
        dataset,
        batch_size=8,
        shuffle=True,
        num_workers=2,
        persistent_workers=True,
        multiprocessing_context="fork",
        collate_fn=collate,
        generator=torch.Generator().manual_seed(3),
    )
    reference = sds.open(uri)
    expected = {bytes(reference[i]["samples"].data.tobytes()) for i in range(len(reference))}
    for _epoch in range(2):
        got = [row.numpy().tobytes() for batch in loader for row in batch["inputs"]]
        assert len(got) == len(reference) and set(got) == expected


def test_a_pickled_dataset_carries_the_store_settings(rclone_server, rclone_dataset):
    """What a spawned worker gets: the endpoint registered in this process, as settings."""
    import torch_required  # noqa: F401 - skips this test without torch

    import pickle

    from sds_loader.torch import SDSTorchDataset

    uri, _ = rclone_dataset
    dataset = SDSTorchDataset(uri)
    state = pickle.loads(pickle.dumps(dataset)).__getstate__()
    assert state["_object_store"].endpoint_url == rclone_server.url
    reader = pickle.loads(pickle.dumps(sds_loader.BatchReader(uri)))
    assert reader.object_store.options.endpoint_url == rclone_server.url
    assert reader.read([4])["samples"].tobytes() == sds.open(uri)[4]["samples"].data.tobytes()


def test_record_metadata_is_read_natively_too(rclone_dataset):
    """Samplers and windows learn record lengths from the metadata shards, in S3 as well."""
    import torch_required  # noqa: F401 - skips this test without torch

    from sds_loader.samplers.length_bucket import record_lengths

    uri, _ = rclone_dataset
    lengths = record_lengths(uri, "a1")
    assert lengths.tolist() == [sds.open(uri)[i]["samples"].data.shape[1] for i in range(48)]


@pytest.fixture()
def proxy(rclone_server):
    proxy = FaultProxy(rclone_server.port)
    yield proxy
    proxy.close()


def through(proxy: FaultProxy, uri: str, **options) -> sds_loader.BatchReader:
    store = S3ObjectStore(options=endpoint_options(proxy.url))
    reader = sds_loader.BatchReader(uri, targets=("label",), object_store=store, **options)
    reader.process_state().source._backoff = sds.RetryPolicy(attempts=5, base_seconds=0.01, max_seconds=0.05)
    return reader


@pytest.mark.parametrize("fault", [503, "drop", "truncate"])
def test_a_share_of_failed_requests_still_reads_exact_batches(proxy, rclone_dataset, fault):
    uri, _ = rclone_dataset
    reader = through(proxy, uri)
    proxy.reset(lambda n, method, path: fault if n % 4 == 2 and "/objects/data/" in path else "pass")
    indices = [7, 19, 20, 33, 45, 2]
    assert_batch(uri, reader.read(indices), indices, ("samples",), ("label",))
    assert any(action == fault for *_, action in proxy.seen)
    assert reader.stats.native_records == len(indices)


def test_a_failing_store_raises_storage_error_then_recovers(proxy, rclone_dataset):
    uri, _ = rclone_dataset
    reader = through(proxy, uri)
    reader.read([0])
    proxy.reset(lambda n, method, path: 500 if "/objects/data/" in path else "pass")
    with pytest.raises(sds.StorageError, match=r"s3://.*/objects/data/.*failed 5 times.*InternalError"):
        reader.read([10, 30])
    proxy.reset()
    assert_batch(uri, reader.read([10, 30]), [10, 30], ("samples",), ("label",))


def test_a_batch_opens_its_new_shards_all_at_once(proxy, rclone_dataset):
    """A batch touching four unopened shards sends all their opening requests
    before any is answered: the proxy holds each until all have arrived."""
    uri, _ = rclone_dataset
    reader = sds_loader.BatchReader(uri, object_store=S3ObjectStore(options=endpoint_options(proxy.url)))
    opening = 2 * 4  # a tail and a head per shard
    together = threading.Barrier(opening, timeout=10)

    def hold_the_opening_requests(n: int, method: str, path: str) -> str:
        if n < opening:
            try:
                together.wait()
            except threading.BrokenBarrierError:
                pass  # they came one shard after another: asserted below
        return "pass"

    proxy.reset(hold_the_opening_requests)
    indices = [1, 13, 25, 37]  # one record in each shard
    assert_batch(uri, reader.read(indices), indices, ("samples",))
    assert not together.broken
    first = [path for _, path, _ in proxy.seen[:opening]]
    assert all("/objects/data/" in path for path in first) and len(set(first)) == 4


def test_a_new_readers_first_batch_asks_for_each_range_once(proxy, rclone_dataset):
    """The first batch learns the layout from its first record while all its
    chunks are in flight: that record's chunk is not fetched a second time."""
    uri, _ = rclone_dataset
    reader = sds_loader.BatchReader(uri, object_store=S3ObjectStore(options=endpoint_options(proxy.url)))
    asked: list[tuple[str, str | None]] = []

    def note_ranges(n: int, method: str, path: str, range_: str | None) -> str:
        if "/objects/data/" in path:
            asked.append((path, range_))
        return "pass"

    proxy.reset(note_ranges)  # type: ignore[arg-type]
    proxy.plan_sees_range = True
    indices = [1, 13, 25, 37]  # one record in each shard
    assert_batch(uri, reader.read(indices), indices, ("samples",))
    assert len(asked) == len(set(asked)), sorted(asked)
    assert reader.stats.fetch_requests == len(asked) == 2 * 4 + len(indices)


def test_a_new_reader_fetches_each_control_document_once(proxy, rclone_dataset):
    """Opening asks for root, snapshot, annotation catalog and manifest with
    one GET each, no HEAD; afterwards the shared store asks the server again."""
    uri, _ = rclone_dataset
    store = S3ObjectStore(options=endpoint_options(proxy.url))
    # A table this process made for this snapshot before would spare the manifest.
    with addressing._TABLES_LOCK:
        addressing._TABLES.clear()
    proxy.reset()
    reader = sds_loader.BatchReader(uri, object_store=store)
    opening = [(method, path) for method, path, _ in proxy.seen]
    assert all(path.endswith(".json") for _, path in opening), opening
    assert {method for method, _ in opening} == {"GET"}
    assert len(opening) == len(set(opening)) == 4
    # A second reader of the same snapshot reads no manifest page again.
    proxy.reset()
    sds_loader.BatchReader(uri, object_store=store)
    assert not any("/manifests/" in path for _, path, _ in proxy.seen), proxy.seen
    assert_batch(uri, reader.read([3, 17]), [3, 17], ("samples",))
    proxy.reset()
    root = f"{uri}/root.json"
    assert store.info(root).size == len(store.read(root))
    assert [method for method, _, _ in proxy.seen] == ["HEAD", "GET"]


def test_a_missing_root_in_s3_is_named_as_before(rclone_server):
    with pytest.raises(sds_loader.DatasetNotFoundError, match=rf"s3://{BUCKET}/no-such-dataset"):
        sds_loader.BatchReader(f"s3://{BUCKET}/no-such-dataset")


def test_stats_count_each_request_once_with_reads_on_several_threads(rclone_dataset):
    """Threads reading one reader at once: stats add up to exactly what the
    source fetched and the records read, not each read's view of the others'."""
    uri, _ = rclone_dataset
    reader = sds_loader.BatchReader(uri, fields=["samples"])
    start = threading.Barrier(4)
    problems: list[str] = []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        start.wait()
        for _ in range(6):
            indices = rng.integers(0, 48, size=5).tolist()
            try:
                assert_batch(uri, reader.read(indices), indices, ("samples",))
            except Exception as error:  # noqa: BLE001 - reported below
                problems.append(f"{type(error).__name__}: {error}")
                return

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not problems, problems
    counters = reader.process_state().source.counters
    assert (reader.stats.fetch_requests, reader.stats.fetched_bytes) == (counters.requests, counters.bytes)
    assert reader.stats.native_records == 4 * 6 * 5
    assert reader.stats.batches == 4 * 6


def test_readers_of_one_process_share_its_s3_store(rclone_dataset):
    uri, _ = rclone_dataset
    assert sds_loader.BatchReader(uri).object_store is sds_loader.BatchReader(uri).object_store


def test_a_missing_shard_is_named(rclone_server, tmp_path):
    write_dataset(tmp_path, 8, functools.partial(capture, samples=512), records_per_shard=4)
    uri = upload_dataset(rclone_server, tmp_path, "missing-shard")
    dataset = sds.open(uri)
    victim = dataset.read_instructions(4, 5)[0].filename
    rclone_server.client().delete_object(Bucket=BUCKET, Key=victim[len(f"s3://{BUCKET}/") :])
    reader = sds_loader.BatchReader(uri)
    assert_batch(uri, reader.read([0, 3]), [0, 3], ("samples",))
    with pytest.raises(sds.StorageError, match=rf"{victim} does not exist"):
        reader.read([1, 5])


def test_sparse_read_target(rclone_server, tmp_path):
    """64 of 2,048 records over 8 shards: at most twice their bytes, plus each footer once."""
    write_dataset(tmp_path, 2048, functools.partial(capture, samples=512), records_per_shard=256)
    uri = upload_dataset(rclone_server, tmp_path, "sparse")
    indices = np.sort(np.random.default_rng(5).choice(2048, size=64, replace=False))
    reader = sds_loader.BatchReader(uri, targets=("label",))
    assert_batch(tmp_path, reader.read(indices), indices.tolist(), ("samples",), ("label",))
    spans = _chunk_spans(os.fspath(tmp_path), indices.tolist())
    own = sum(end - begin for shard in spans.values() for begin, end in shard["records"])
    footers = sum(shard["footer"] + HEAD_BYTES for shard in spans.values())
    assert len(spans) == 8
    assert own <= reader.stats.fetched_bytes <= 2 * own + footers
    # One GET per run of adjacent records, two per shard opened.
    assert reader.stats.fetch_requests <= len(indices) + 2 * len(spans)


def test_chunk_ranges_are_the_records_chunks(rclone_dataset):
    """What the bench fetches to time requests alone: each record's chunk, as the shard stores it."""
    from sds_loader import _native

    uri, local = rclone_dataset
    reader = sds_loader.BatchReader(uri)
    reader.read([0])
    state = reader.process_state()
    indices = [1, 13, 26, 40]  # one record in each of four shards
    files, records = state.table.locate(np.asarray(indices))
    ranges = _native.chunk_ranges(state.native, files, records)
    spans = _chunk_spans(local, indices)
    expected = sorted(
        (int(file), begin, end - begin)
        for file, (path, shard) in zip(files.tolist(), spans.items(), strict=True)
        for begin, end in shard["records"]
    )
    assert sorted(ranges) == expected


def _chunk_spans(local: str, ordinals) -> dict[str, dict]:
    """Per shard of these records: each record chunk's (begin, end), and the bytes
    from the footer index's chunk to the end of the file (footer and postscript)."""
    dataset = sds.open(local)
    spans: dict[str, dict] = {}
    for ordinal in ordinals:
        instruction = dataset.read_instructions(int(ordinal), int(ordinal) + 1)[0]
        path = instruction.filename
        if path not in spans:
            chunks = [chunk for chunk in read_chunks(path) if chunk.chunk_type == "r"]
            spans[path] = {
                "chunks": chunks[:-2],
                "footer": os.path.getsize(path) - chunks[-2].begin,
                "records": [],
            }
        chunk = spans[path]["chunks"][instruction.skip]
        spans[path]["records"].append((chunk.begin, chunk.end))
    return spans


def _own_bytes(uri: str, local: str, ordinals) -> int:
    """The stored bytes of these records' chunks, headers included, from the local copy."""
    spans = _chunk_spans(local, ordinals)
    return sum(end - begin for shard in spans.values() for begin, end in shard["records"])
