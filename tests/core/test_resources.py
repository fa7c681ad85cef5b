"""Memory and file descriptors over long runs, and claims of huge sizes.

* Resident memory (/proc/self/statm) and open descriptors (/proc/self/fd)
  stay flat over 300 batches drawn across 50 shards with max_open_files=4,
  after a warm-up.
* A chunk whose hashes are all valid but which claims a decoded record of
  2**40 bytes, just over the 2 GiB the core holds at once, or 1 GiB (under
  that limit, but far more than its few compressed bytes can yield) is
  refused as corrupt before anything is allocated for it: peak resident
  memory does not move. The chunk is built by hand (zstd, snappy and brotli
  framing written from their public formats) and hashed with Debian's
  libhighwayhash.
"""

from __future__ import annotations

import os
import re
import struct
from functools import partial

import numpy as np
import pytest
import signal_dataset as sds
from native_required import _native  # noqa: F401,E402 - a build without it fails the run (conftest.py)
from sds_factory import (
    BLOCK_SIZE,
    CHUNK_HEADER_SIZE,
    assert_matches_reference,
    capture,
    data_shards,
    record_chunks,
    write_dataset,
)
from shard_surgery import riegeli_hash, varint

import sds_loader

if not os.path.exists("/proc/self/statm"):
    pytest.skip("needs Linux /proc", allow_module_level=True)

PAGE = os.sysconf("SC_PAGE_SIZE")
FIELDS = ("samples",)
SHARDS = 50
PER_SHARD = 6


def resident_bytes() -> int:
    with open("/proc/self/statm") as file:
        return int(file.read().split()[1]) * PAGE


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture(scope="module")
def many_shards(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("many-shards")
    options = [
        None,
        "group_size:1,uncompressed",
        "group_size:1,snappy",
        "group_size:4,zstd:3",
        "group_size:1,brotli:6",
    ]
    write_dataset(
        root,
        SHARDS * PER_SHARD,
        partial(capture, samples=1024),
        records_per_shard=PER_SHARD,
        writer_options=[options[k % len(options)] for k in range(SHARDS)],
    )
    return os.fspath(root)


def test_memory_and_descriptors_stay_flat(many_shards):
    reader = sds_loader.BatchReader(
        many_shards, fields=FIELDS, targets=("label",), threads=2, max_open_files=4
    )
    rng = np.random.default_rng(11)
    total = SHARDS * PER_SHARD
    out = None
    first = rng.integers(0, total, size=32)
    assert_matches_reference(many_shards, reader.read(first), first.tolist(), FIELDS, ("label",))
    samples = []
    for batch_number in range(300):
        indices = rng.integers(0, total, size=32)
        batch = reader.read(indices, out=out)
        out = batch  # reuse the buffers, as a training loop would
        if batch_number == 60:
            warm_rss, warm_fds = resident_bytes(), open_descriptors()
        if batch_number % 50 == 49:
            samples.append((resident_bytes(), open_descriptors()))
    assert reader.stats.native_records == 301 * 32
    assert_matches_reference(many_shards, out, indices.tolist(), FIELDS, ("label",))
    final_rss, final_fds = resident_bytes(), open_descriptors()
    # At most max_open_files shard descriptors are held, so nothing accumulates.
    assert final_fds <= warm_fds + 1, (warm_fds, samples, final_fds)
    assert max(fds for _, fds in samples) <= warm_fds + 1, (warm_fds, samples)
    if "asan" in os.environ.get("LD_PRELOAD", ""):
        return  # AddressSanitizer's quarantine holds freed memory on purpose
    # 240 more batches after warm-up: a leak of even one 64 KiB record each
    # would add 15 MiB.
    assert final_rss - warm_rss < 8 << 20, (warm_rss, samples, final_rss)


# -- a chunk that claims a huge record ----------------------------------------


def snappy_literal(payload: bytes, claimed: int | None = None) -> bytes:
    """A snappy stream of one literal; the preamble may claim another length."""
    assert 0 < len(payload) <= 60
    return varint(len(payload) if claimed is None else claimed) + bytes([(len(payload) - 1) << 2]) + payload


def brotli_raw(payload: bytes) -> bytes:
    """A brotli stream of one uncompressed meta-block, then an empty last one."""
    assert 0 < len(payload) <= 1 << 16
    # WBITS 0 (a 64 KiB window), ISLAST 0, MNIBBLES 0 (four nibbles), MLEN-1, ISUNCOMPRESSED 1.
    bits = 0 | (0 << 1) | (0 << 2) | ((len(payload) - 1) << 4) | (1 << 20)
    return bits.to_bytes(3, "little") + payload + bytes([0b11])  # ISLAST 1, ISLASTEMPTY 1


def zstd_raw(payload: bytes) -> bytes:
    """A zstd frame of one raw block, with no content size in its header."""
    header = (1 | (len(payload) << 3)).to_bytes(3, "little")  # last block, raw
    return struct.pack("<I", 0xFD2FB528) + b"\x00\x00" + header + payload


def hostile_chunk_data(compression: str, claim: int, record_start: bytes) -> bytes:
    sizes = varint(claim)
    if compression == "snappy":
        compressed_sizes = varint(len(sizes)) + snappy_literal(sizes)
        values = varint(claim) + snappy_literal(record_start[:60], claimed=claim)
        return b"s" + varint(len(compressed_sizes)) + compressed_sizes + values
    if compression == "brotli":
        compressed_sizes = varint(len(sizes)) + brotli_raw(sizes)
        values = varint(claim) + brotli_raw(record_start)
        return b"b" + varint(len(compressed_sizes)) + compressed_sizes + values
    compressed_sizes = varint(len(sizes)) + zstd_raw(sizes)
    values = varint(claim) + zstd_raw(record_start)
    return b"z" + varint(len(compressed_sizes)) + compressed_sizes + values


def peak_resident_reset() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as file:
            file.write("5")
        return True
    except OSError:
        return False


def peak_resident_bytes() -> int:
    with open("/proc/self/status") as file:
        match = re.search(r"^VmHWM:\s+(\d+) kB", file.read(), re.M)
    return int(match.group(1)) * 1024


@pytest.mark.parametrize(
    "claim", [2**40, (3 << 30) + 5, 2**63 - 1, 1 << 30], ids=["2^40", "3GiB", "2^63", "1GiB"]
)
@pytest.mark.parametrize(
    "compression,options",
    [("zstd", None), ("snappy", "group_size:1,snappy"), ("brotli", "group_size:1,brotli:6")],
    ids=["zstd", "snappy", "brotli"],
)
@pytest.mark.parametrize("verify", [True, False], ids=["verified", "unverified"])
def test_huge_decoded_size_is_refused_before_allocating(tmp_path, compression, options, claim, verify):
    hash64 = riegeli_hash
    root = tmp_path / "dataset"
    write_dataset(root, 4, partial(capture, samples=8), writer_options=options)
    (shard,) = data_shards(root)
    victim = record_chunks(shard)[1]
    with open(shard, "rb") as file:
        data = bytearray(file.read())
    reference = sds.open(os.fspath(root))
    record_start = sds.encode(reference[1])[:48] if hasattr(sds, "encode") else b"\x10" + b"\x00" * 7
    payload = hostile_chunk_data(compression, claim, record_start)
    header = struct.pack("<QQQQ", len(payload), hash64(payload), ord("r") | (1 << 8), claim)
    chunk = struct.pack("<Q", hash64(header)) + header + payload
    end = victim.begin + len(chunk)
    assert end <= victim.end and end < BLOCK_SIZE, "the crafted chunk must fit where the old one was"
    assert len(chunk) > CHUNK_HEADER_SIZE
    data[victim.begin : end] = chunk
    with open(shard, "wb") as file:
        file.write(data)

    have_peak = peak_resident_reset()
    before = peak_resident_bytes() if have_peak else resident_bytes()
    for read in (
        lambda: sds_loader.BatchReader(root, fields=FIELDS, verify_checksums=verify).read([1]),
        lambda: sds_loader.BatchReader(root, fields=FIELDS, verify_checksums=verify)[1],
        lambda: sds_loader.BatchReader(root, fields=FIELDS, verify_checksums=verify, threads=1).read(
            [0, 1, 2]
        ),
    ):
        with pytest.raises(sds_loader.CorruptShardError) as raised:
            read()
        message = str(raised.value)
        assert os.path.basename(shard) in message and re.search(r"\brecord 1\b", message), message
    after = peak_resident_bytes() if have_peak else resident_bytes()
    assert after - before < 64 << 20, f"resident memory rose by {(after - before) >> 20} MiB"
    # The records around it still read.
    reader = sds_loader.BatchReader(root, fields=FIELDS, verify_checksums=verify)
    assert_matches_reference(root, reader.read([0, 2, 3]), [0, 2, 3], FIELDS)


def test_record_count_beyond_the_sizes_is_refused_before_allocating(tmp_path):
    """A chunk may claim as many records as it has bytes of room (Riegeli pads
    a chunk to one byte per record), but every record needs a byte of size
    too: a 48 MiB chunk whose sizes hold one byte and claim 48 Mi records is
    refused before 16 bytes per claimed record are allocated."""
    root = tmp_path / "dataset"
    write_dataset(
        root, 1, partial(capture, channels=1, samples=6 << 20), writer_options="group_size:1,uncompressed"
    )
    (shard,) = data_shards(root)
    (victim,) = record_chunks(shard)
    claimed = victim.end - victim.begin  # keeps the chunk's end, so every block header still agrees
    payload = b"\x00" + varint(1) + b"\x00"  # uncompressed, one byte of sizes: one empty record
    header = struct.pack("<QQQQ", len(payload), riegeli_hash(payload), ord("r") | (claimed << 8), 0)
    with open(shard, "r+b") as file:
        file.seek(victim.begin)
        file.write(struct.pack("<Q", riegeli_hash(header)) + header + payload)

    from sds_loader.cli import native_tools

    chunk_payloads = native_tools.function("chunk_payloads")
    have_peak = peak_resident_reset()
    before = peak_resident_bytes() if have_peak else resident_bytes()
    with pytest.raises(sds_loader.CorruptShardError, match="claims .* records"):
        chunk_payloads(shard, [0])
    after = peak_resident_bytes() if have_peak else resident_bytes()
    assert after - before < 64 << 20, f"resident memory rose by {(after - before) >> 20} MiB"
    with pytest.raises(sds_loader.CorruptShardError):
        sds_loader.BatchReader(root).read([0])


def test_a_readers_chunk_cap_is_its_own(tmp_path):
    """max_chunk_bytes caps what one chunk may decode to for this reader alone."""
    from sds_factory import assert_matches_reference, write_dataset

    root = tmp_path / "dataset"
    write_dataset(root, 4)  # records of 2 x 256 complex64: 4 KiB of tensor, a little more decoded
    capped = sds_loader.BatchReader(root, fields=("samples",), threads=1, max_chunk_bytes=1024)
    with pytest.raises(sds_loader.CorruptShardError, match=r"more than the 1024 this reader holds at once"):
        capped.read([0, 1])
    # Another reader of the same dataset in the same process keeps the default.
    plain = sds_loader.BatchReader(root, fields=("samples",), threads=1)
    assert_matches_reference(root, plain.read([1, 0]), [1, 0], ("samples",))
    roomy = sds_loader.BatchReader(root, fields=("samples",), threads=1, max_chunk_bytes=1 << 20)
    assert_matches_reference(root, roomy.read([3, 2]), [3, 2], ("samples",))
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="max_chunk_bytes"):
            sds_loader.BatchReader(root, max_chunk_bytes=bad)
