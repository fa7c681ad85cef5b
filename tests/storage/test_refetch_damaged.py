"""Bytes that arrive damaged cost a refetch, never the job, and are never kept.

Against the real rclone S3 server behind the fault-injecting proxy, which
flips one byte of chosen answers: a flipped record run or shard tail is
fetched again and read exact, counted in `stats.refetches` apart from
`stats.fetch_retries`; a tail flipped while a node cache fills is not
stored there, so a later reader finds only good bytes; a reader whose shard
failed while the fault lasted reads it once the fault is gone; an object
the store itself holds damaged still raises `CorruptShardError`, after
`max_attempts` fetches, naming the object, the bytes and the check. A
shard whose footer is longer than the tail a reader opens it with is
checked and kept whole. Every row is checked against signal_dataset's
reader.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from pathlib import Path

import pytest
from cache_readers import settled
from fault_proxy import Fault, FaultProxy, every, first
from native_required import _native  # noqa: F401
from s3_fixtures import endpoint_options, upload_dataset
from sds_factory import assert_batch, capture, write_dataset
from signal_dataset.storage import S3ObjectStore

import sds_loader
from sds_loader.errors import CorruptShardError

FIELDS = ("samples",)
TARGETS = ("label",)
#: Records of every shard of the 48-record dataset (12 a shard), two of each.
SPREAD = [0, 5, 12, 17, 24, 29, 36, 41]


@pytest.fixture
def proxy(rclone_server):
    proxy = FaultProxy(rclone_server.port, served=rclone_server.root)
    try:
        yield proxy
    finally:
        proxy.close()


def reader_through(
    proxy: FaultProxy, uri: str, *, max_attempts: int = 5, **options
) -> sds_loader.BatchReader:
    store = S3ObjectStore(options=dataclasses.replace(endpoint_options(proxy.url), max_attempts=max_attempts))
    return sds_loader.BatchReader(uri, fields=FIELDS, targets=TARGETS, object_store=store, **options)


def cache_entries(cache: Path) -> list[Path]:
    """The cache's entry files (named OFFSET-SIZE)."""
    return [path for path in cache.rglob("*") if re.fullmatch(r"[0-9a-f]{16}-[0-9a-f]{16}", path.name)]


def test_a_flipped_record_run_is_fetched_again_and_read_exact(proxy, rclone_dataset):
    uri, _ = rclone_dataset
    proxy.inject(Fault("flip", first(1), parts=("body",)))
    reader = reader_through(proxy, uri)
    assert_batch(uri, reader.read(SPREAD), SPREAD, FIELDS, TARGETS)
    flipped = proxy.injected["flip"]
    assert flipped >= len(SPREAD) // 2
    stats = reader.stats
    # Every flipped answer was a record run (or a chunk read alone) that failed its
    # hash and was read again; none of it is a retry of a fault on the way.
    assert 1 <= stats.refetches <= flipped
    assert stats.fetch_retries == 0
    reader.close()


def test_a_flipped_tail_is_fetched_again_and_never_stored_in_the_node_cache(proxy, rclone_dataset, tmp_path):
    uri, _ = rclone_dataset
    cache = tmp_path / "cache"
    proxy.inject(Fault("flip", first(1), parts=("tail",)))
    reader = reader_through(proxy, uri, cache_dir=cache)
    assert_batch(uri, reader.read(SPREAD), SPREAD, FIELDS, TARGETS)
    assert proxy.injected_at[("flip", "tail")] == 4  # each shard's first tail
    assert reader.stats.refetches == 4
    reader.close()
    assert cache_entries(cache), "the cache holds nothing: the test would prove nothing"
    # A new reader, its proxy passing everything: the footers it reads from the cache
    # are whole (a damaged one would fail its check there and be refetched and dropped).
    proxy.reset()
    again = reader_through(proxy, uri, cache_dir=cache)
    assert_batch(uri, again.read(SPREAD), SPREAD, FIELDS, TARGETS)
    assert again.stats.refetches == 0
    assert again.stats.cache_drops == 0
    assert proxy.gets["tail"] == 4  # each shard's one-byte probe, the footer from the cache
    again.close()


def test_a_reader_reads_a_shard_again_once_its_fault_is_gone(proxy, rclone_dataset):
    uri, _ = rclone_dataset
    reader = reader_through(proxy, uri, max_attempts=2)  # opens shard 0 for record 0's layout
    proxy.inject(Fault("flip", every(), parts=("tail",)))
    with pytest.raises(CorruptShardError) as raised:
        reader.read(SPREAD)
    message = str(raised.value)
    assert "objects/data/" in message and "failed this check 2 times" in message
    assert reader.stats.refetches >= 1
    proxy.reset()
    # The same reader, nothing rebuilt: no damaged tail, footer or index was kept.
    assert_batch(uri, reader.read(SPREAD), SPREAD, FIELDS, TARGETS)
    reader.close()


def test_an_object_damaged_in_the_store_raises_after_max_attempts(proxy, rclone_dataset):
    uri, _ = rclone_dataset
    reader = reader_through(proxy, uri, max_attempts=3)
    reader.read([0])  # opened, and record 0's layout learnt, before the fault
    proxy.inject(Fault("flip", every(), parts=("body",)))
    with pytest.raises(CorruptShardError) as raised:
        reader.read([13])
    message = str(raised.value)
    # The object, the bytes, the check, and how often the store's bytes failed it.
    assert "s3://" in message and "objects/data/" in message
    assert "hash" in message or "header" in message
    assert "as the store sent them failed this check 3 times" in message
    assert reader.stats.refetches == 2
    proxy.reset()
    assert_batch(uri, reader.read([13]), [13], FIELDS, TARGETS)
    reader.close()


def test_a_flipped_readahead_range_is_dropped_and_fetched_again(proxy, rclone_dataset):
    uri, _ = rclone_dataset
    reader = reader_through(proxy, uri)
    reader.read([0])
    proxy.inject(Fault("flip", first(1), parts=("body",)))
    wanted = list(range(12, 24))
    reader.will_need(wanted)
    assert reader.opened_state().readahead().wait_idle(60)
    assert proxy.injected["flip"] >= 1
    assert_batch(uri, reader.read(wanted), wanted, FIELDS, TARGETS)
    assert reader.stats.refetches >= 1
    # The damaged bytes were dropped from readahead: read again, nothing fails.
    before = reader.stats.refetches
    assert_batch(uri, reader.read(wanted), wanted, FIELDS, TARGETS)
    assert reader.stats.refetches == before
    reader.close()


@pytest.fixture
def long_footer_dataset(rclone_server, tmp_path_factory) -> tuple[str, str]:
    """(s3:// URI, local copy) of one shard of 1,500 short records, whose footer outgrows a 128 KiB tail."""
    local = tmp_path_factory.mktemp("long-footer")
    write_dataset(local, 1500, functools.partial(capture, channels=1, samples=4), records_per_shard=1500)
    return upload_dataset(rclone_server, local, "long-footer"), os.fspath(local)


def test_a_footer_longer_than_the_tail_is_checked_and_kept_whole(proxy, long_footer_dataset, tmp_path):
    uri, _ = long_footer_dataset
    cache = tmp_path / "cache"
    wanted = [0, 700, 1499]
    reader = reader_through(proxy, uri, cache_dir=cache)
    assert_batch(uri, reader.read(wanted), wanted, FIELDS, TARGETS)
    reader.close()
    proxy.reset()
    # Read from the cache by a new reader: the tail's probe is its only GET of the footer.
    again = reader_through(proxy, uri, cache_dir=cache)
    assert_batch(uri, again.read(wanted), wanted, FIELDS, TARGETS)
    assert proxy.gets["tail"] == 1
    assert again.stats.refetches == 0 and again.stats.cache_drops == 0
    again.close()


def test_a_tail_damaged_in_the_node_cache_is_fetched_and_stored_again(
    rclone_server, rclone_dataset, tmp_path
):
    uri, _ = rclone_dataset
    cache = tmp_path / "cache"
    store = S3ObjectStore(options=endpoint_options(rclone_server.url))

    def reader() -> sds_loader.BatchReader:
        return sds_loader.BatchReader(
            uri, fields=FIELDS, targets=TARGETS, object_store=store, cache_dir=cache
        )

    first_reader = settled(reader())
    assert_batch(uri, first_reader.read(SPREAD), SPREAD, FIELDS, TARGETS)
    settled(first_reader).close()
    tails = [path for path in cache_entries(cache) if int(path.name.split("-")[1], 16) == 1 << 17]
    assert len(tails) == 4  # each shard's footer, kept whole
    for path in tails:  # a byte of each flipped on the disk, under the entry's block hashes
        data = bytearray(path.read_bytes())
        data[-100] ^= 0xFF
        path.write_bytes(bytes(data))
    second = settled(reader())
    assert_batch(uri, second.read(SPREAD), SPREAD, FIELDS, TARGETS)
    assert second.stats.cache_drops >= 4
    settled(second).close()
    # Stored again, whole: a third reader reads every footer and record from the cache.
    third = reader()
    assert_batch(uri, third.read(SPREAD), SPREAD, FIELDS, TARGETS)
    assert third.stats.cache_drops == 0 and third.stats.refetches == 0
    assert third.stats.fetched_bytes == 4  # each shard's one-byte probe
    third.close()


def test_record_bytes_that_failed_are_not_left_in_the_node_cache(proxy, rclone_dataset, tmp_path):
    uri, _ = rclone_dataset
    cache = tmp_path / "cache"
    proxy.inject(Fault("flip", first(1), parts=("body",)))
    reader = settled(reader_through(proxy, uri, cache_dir=cache))
    assert_batch(uri, reader.read(SPREAD), SPREAD, FIELDS, TARGETS)
    assert reader.stats.refetches >= 1
    settled(reader).close()
    # Whatever the damaged answers were written as is gone, and the refetched bytes
    # took their place: a new reader reads every record from the cache, all of it good.
    proxy.reset()
    again = reader_through(proxy, uri, cache_dir=cache)
    assert_batch(uri, again.read(SPREAD), SPREAD, FIELDS, TARGETS)
    assert again.stats.refetches == 0 and again.stats.cache_drops == 0
    assert proxy.gets["body"] == 0
    again.close()
