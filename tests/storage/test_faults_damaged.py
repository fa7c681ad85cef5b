"""Bytes that stay damaged raise `CorruptShardError` naming the object, after the bounded refetches.

A shard whose every answer is damaged (the proxy flips each GET of its tail
or of a record's run, as a faulty path would; or, on S3, the object itself
damaged in the store) fails its check `max_attempts` times, and the error
says so and names it; the reader's other shards read on. Once the fault is
gone, the same reader reads that shard exactly, and a new reader over the
node cache it filled meanwhile finds nothing damaged there.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid

import pytest
from cache_readers import settled
from fault_proxy import BLOCK_HEADER_SIZE, BLOCK_SIZE, Fault, FaultProxy, every
from fault_stores import TARGETS, ProxiedStore
from native_required import _native  # noqa: F401
from s3_fixtures import BUCKET
from sds_factory import CHUNK_HEADER_SIZE, record_chunks, shard_ordinals

import sds_loader

#: Attempts at each range: S3's are the store's option, GCS's the default.
ATTEMPTS = {"s3": 3, "gcs": 5}


def victim(local: str, number: int = 1) -> tuple[str, list[int]]:
    """(path below the dataset's root, ordinals) of data shard `number`, in ordinal order, of the dataset
    at `local` (shard 1 holds ordinals 12 to 23; 0 and 47 lie in shards 0 and 3)."""
    path, ordinals = sorted(shard_ordinals(local).items(), key=lambda item: item[1][0])[number]
    return os.path.relpath(path, local), ordinals


def failed_checks(uri: str, times: int) -> str:
    """What the error says: the object, the check, the range as the store sent it, and how often it failed."""
    name = re.escape(uri)
    return rf"{name}: .* fails its hash check \(bytes \d+-\d+ of {name} .*failed \w+ check {times} times"


def open_reader(proxied: ProxiedStore, cache=None, **store) -> sds_loader.BatchReader:
    return sds_loader.BatchReader(
        proxied.uri, targets=TARGETS, object_store=proxied.object_store(**store), cache_dir=cache
    )


@pytest.mark.parametrize("cached", [False, True], ids=["uncached", "node-cache"])
@pytest.mark.parametrize("part", ["tail", "body"])
def test_bytes_damaged_on_every_answer_raise_then_read_once_the_fault_ends(proxied, part, cached, tmp_path):
    cache = tmp_path / "cache" if cached else None
    shard, ordinals = victim(proxied.local)
    inside = [ordinals[3], ordinals[7]]
    elsewhere = [0, 47]  # shards 0 and 3
    attempts = ATTEMPTS[proxied.kind]
    reader = open_reader(proxied, cache, **({"max_attempts": attempts} if proxied.kind == "s3" else {}))
    if part == "body":
        proxied.assert_rows(reader.read(inside[:1]), inside[:1])  # the shard opens unharmed
    proxied.proxy.inject(Fault("flip", every(), parts=(part,), where=shard))
    with pytest.raises(sds_loader.CorruptShardError, match=failed_checks(f"{proxied.uri}/{shard}", attempts)):
        reader.read(inside[1:] + elsewhere)
    assert reader.stats.refetches == attempts - 1
    # A shard's opening asks for its tail again as it asked the first time;
    # a run may be asked for again in parts, each of them flipped.
    flipped = proxied.proxy.injected["flip"]
    assert flipped == attempts if part == "tail" else flipped >= attempts
    # The fault is the shard's alone: the others read on.
    proxied.assert_rows(reader.read(elsewhere), elsewhere)
    proxied.proxy.reset()
    proxied.assert_rows(reader.read(inside + elsewhere), inside + elsewhere)
    if cached:
        settled(reader)
        again = open_reader(proxied, cache)
        proxied.assert_rows(again.read(inside + elsewhere), inside + elsewhere)
        assert (again.stats.refetches, again.stats.cache_drops) == (0, 0)


@pytest.fixture
def damaged_in_the_store(rclone_server, small_s3_dataset, tmp_path):
    """A copy of the small dataset damaged in the store, each a byte flipped: a record of shard 1 and
    the postscript of shard 2; (ProxiedStore over it, {"record"/"footer": (shard's path, ordinals)})."""
    _, local = small_s3_dataset
    copy = shutil.copytree(local, tmp_path / "copy")
    record, footer = victim(local, 1), victim(local, 2)
    # A byte of record 5's compressed data; the postscript chunk's header, after
    # the block header that opens the last block.
    flip(copy / record[0], lambda data: record_chunks(copy / record[0])[5].physical(CHUNK_HEADER_SIZE + 99))
    flip(copy / footer[0], lambda data: (len(data) - 1) // BLOCK_SIZE * BLOCK_SIZE + BLOCK_HEADER_SIZE + 8)
    damaged_uri = rclone_server.upload_tree(copy, BUCKET, f"damaged-{uuid.uuid4().hex[:8]}")
    proxy = FaultProxy(rclone_server.port, served=rclone_server.root)
    try:
        yield ProxiedStore("s3", damaged_uri, local, proxy), {"record": record, "footer": footer}
    finally:
        proxy.close()


def flip(path, where) -> None:
    data = bytearray(path.read_bytes())
    data[where(data)] ^= 0x10
    path.write_bytes(bytes(data))
    FLIPPED[os.path.basename(path)] = where(data), len(data)


#: The offset flipped in each damaged shard, and the shard's size, by file name.
FLIPPED: dict[str, tuple[int, int]] = {}


def covers(sent: str | None, offset: int, size: int) -> bool:
    """Whether the Range header `sent` ("bytes=A-B", or a suffix "bytes=-N") asks for byte `offset`."""
    first_byte, _, last = (sent or "").removeprefix("bytes=").partition("-")
    if first_byte == "":
        return offset >= size - int(last)
    return int(first_byte) <= offset <= int(last)


@pytest.mark.parametrize("damage", ["record", "footer"])
def test_an_object_damaged_in_the_store_raises_naming_it_after_the_refetches(damaged_in_the_store, damage):
    proxied, damaged = damaged_in_the_store
    shard, ordinals = damaged[damage]
    attempts = ATTEMPTS["s3"]
    reader = open_reader(proxied, max_attempts=attempts)
    with pytest.raises(sds_loader.CorruptShardError, match=failed_checks(f"{proxied.uri}/{shard}", attempts)):
        reader.read([0, ordinals[5], 47])
    assert reader.stats.refetches == attempts - 1
    assert proxied.proxy.injected.total() == 0
    # Every attempt asked the store for the damaged byte (a tail, as a suffix).
    offset, size = FLIPPED[os.path.basename(shard)]
    asked = [sent for path, sent, _, _ in proxied.proxy.log if shard in path and covers(sent, offset, size)]
    assert len(asked) == attempts, asked
    # The other shards, and for a damaged record its neighbours, read on.
    others = [ordinals[4], ordinals[6], 0, 47] if damage == "record" else [0, 47]
    proxied.assert_rows(reader.read(others), others)
