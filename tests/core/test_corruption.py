"""Damaged shards raise CorruptDatasetError naming the shard; they never return bad bytes.

Each test copies a small intact dataset, damages one data shard at a place
found by walking its Riegeli layout (block headers, chunk headers, chunk data,
the footer index, the postscript, the file size), and reads it back. Records
the damage reaches must raise `signal_dataset.CorruptDatasetError` whose
message names the shard file; every other record, in that shard and in the
other one, must still come back byte-identical to the intact dataset.

signal_dataset's own reader reports most of this damage as a bare
RuntimeError from riegeli, so these tests are about the native reader only.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
import pytest
import signal_dataset as sds
from native_required import _native  # noqa: F401,E402 - a build without it fails the run (conftest.py)
from sds_factory import (
    BLOCK_HEADER_SIZE,
    BLOCK_SIZE,
    CHUNK_HEADER_SIZE,
    Chunk,
    assert_batch,
    capture,
    read_chunks,
    record_chunks,
    shard_ordinals,
    write_dataset,
)
from shard_surgery import tensor_byte_offset

import sds_loader

RECORDS = 8
PER_SHARD = 4
SAMPLES = 4096  # 2 x 4096 complex64: 64 KiB per record, so chunks cross block boundaries
FIELDS = ("samples",)


@pytest.fixture(scope="module", params=[None, "group_size:1,uncompressed"], ids=["zstd", "uncompressed"])
def pristine(request, tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("pristine")
    write_dataset(
        root,
        RECORDS,
        partial(capture, samples=SAMPLES),
        records_per_shard=PER_SHARD,
        writer_options=request.param,
    )
    return os.fspath(root)


# -- where to damage --------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """What a damage function learns about the shard it damages."""

    data: bytearray
    chunks: list[Chunk]  # every chunk, signature to postscript
    records: list[Chunk]  # the chunk of each record, in shard order

    @property
    def footer(self) -> Chunk:
        return [chunk for chunk in self.chunks if chunk.chunk_type == "r"][-2]

    @property
    def postscript(self) -> Chunk:
        return [chunk for chunk in self.chunks if chunk.chunk_type == "r"][-1]

    def spanning(self, offset: int) -> list[int]:
        """Shard-local records whose chunk includes file offset `offset`."""
        return [k for k, chunk in enumerate(self.records) if chunk.begin <= offset < chunk.end]


#: Returns the shard-local records the damage reaches, or None for all of them.
Damage = Callable[[Target], "list[int] | None"]


def flip(target: Target, offset: int, mask: int = 0x40) -> None:
    target.data[offset] ^= mask


def block_header(offset_in_header: int) -> Damage:
    def damage(target: Target) -> list[int]:
        flip(target, BLOCK_SIZE + offset_in_header)
        reached = target.spanning(BLOCK_SIZE)
        assert reached, "no record chunk crosses the first block boundary"
        return reached

    return damage


def first_block_header(offset_in_header: int) -> Damage:
    """The block header at offset 0 interrupts only the signature chunk, and
    riegeli's own random access never looks at it. The fixed first 64 bytes are
    what says the file is a Riegeli/records file at all, so a reader that opens
    a shard is expected to check them and refuse the whole shard."""

    def damage(target: Target) -> None:
        flip(target, offset_in_header)
        return None

    return damage


def chunk_header(offset_in_header: int, mask: int = 0x40) -> Damage:
    def damage(target: Target) -> list[int]:
        flip(target, target.records[1].physical(offset_in_header), mask)
        return [1]

    return damage


def chunk_data(where: str) -> Damage:
    def damage(target: Target) -> list[int]:
        chunk = target.records[1]
        offset = {
            "first": 0,
            "second": 1,
            "third": 3,
            "middle": chunk.data_size // 2,
            "last": chunk.data_size - 1,
        }[where]
        flip(target, chunk.physical(CHUNK_HEADER_SIZE + offset))
        return [1]

    return damage


def footer(part: str) -> Damage:
    def damage(target: Target) -> None:
        chunk = target.footer
        offset = 8 if part == "header" else CHUNK_HEADER_SIZE + chunk.data_size // 2
        flip(target, chunk.physical(offset))
        return None

    return damage


def postscript(part: str) -> Damage:
    def damage(target: Target) -> None:
        chunk = target.postscript
        assert chunk.begin % BLOCK_SIZE == 0 and chunk.begin + BLOCK_SIZE == len(target.data)
        offset = {
            "block-header": chunk.begin + 8,
            "chunk-header": chunk.physical(8),
            "data": chunk.physical(CHUNK_HEADER_SIZE + 2),
        }[part]
        flip(target, offset)
        return None

    return damage


def resize(new_size: Callable[[int], int], fill: bytes = b"\0") -> Damage:
    def damage(target: Target) -> None:
        size = len(target.data)
        wanted = new_size(size)
        assert wanted != size
        if wanted < size:
            del target.data[wanted:]
        else:
            target.data.extend(fill * (wanted - size))
        return None

    return damage


DAMAGES: dict[str, Damage] = {
    "block-header-hash": block_header(0),
    "block-header-previous": block_header(8),
    "block-header-next": block_header(16),
    "block-header-last-byte": block_header(BLOCK_HEADER_SIZE - 1),
    "first-block-header-hash": first_block_header(0),
    "first-block-header-previous": first_block_header(8),
    "first-block-header-next": first_block_header(16),
    "chunk-header-hash": chunk_header(0),
    "chunk-header-data-size": chunk_header(8),
    "chunk-header-data-size-high": chunk_header(15),
    "chunk-header-data-hash": chunk_header(16),
    "chunk-header-type": chunk_header(24),
    "chunk-header-num-records": chunk_header(25, 0x02),
    "chunk-header-num-records-high": chunk_header(31),
    "chunk-header-decoded-size": chunk_header(32),
    "chunk-header-decoded-size-high": chunk_header(39),
    "chunk-data-compression-type": chunk_data("first"),
    "chunk-data-sizes-length": chunk_data("second"),
    "chunk-data-sizes": chunk_data("third"),
    "chunk-data-middle": chunk_data("middle"),
    "chunk-data-last": chunk_data("last"),
    "footer-header": footer("header"),
    "footer-data": footer("data"),
    "postscript-block-header": postscript("block-header"),
    "postscript-chunk-header": postscript("chunk-header"),
    "postscript-data": postscript("data"),
    "truncated-half": resize(lambda size: size // 2),
    "truncated-one-byte": resize(lambda size: size - 1),
    "truncated-to-100-bytes": resize(lambda size: 100),
    "truncated-to-empty": resize(lambda size: 0),
    "truncated-last-block": resize(lambda size: size - BLOCK_SIZE),
    "grown-one-byte": resize(lambda size: size + 1),
    "grown-one-zero-block": resize(lambda size: size + BLOCK_SIZE),
}


@dataclass(frozen=True)
class Damaged:
    root: str
    shard: str
    #: Ordinals whose bytes the damage reaches.
    reached: list[int]
    #: Ordinals of the damaged shard the damage does not reach.
    spared: list[int]
    #: Ordinals of the other, intact shard.
    elsewhere: list[int]


def damaged_copy(pristine: str, destination, damage: Damage) -> Damaged:
    root = os.fspath(destination / "copy")
    shutil.copytree(pristine, root)
    owners = shard_ordinals(root)
    shard = next(path for path, ordinals in owners.items() if 0 in ordinals)
    with open(shard, "rb") as file:
        data = bytearray(file.read())
    target = Target(data=data, chunks=read_chunks(shard), records=record_chunks(shard))
    assert len(target.records) == PER_SHARD
    reached_locals = damage(target)
    with open(shard, "wb") as file:
        file.write(data)
    ordinals = owners[shard]
    if reached_locals is None:
        reached, spared = list(ordinals), []
    else:
        reached = [ordinals[k] for k in reached_locals]
        spared = [o for o in ordinals if o not in reached]
    elsewhere = sorted(o for path, values in owners.items() if path != shard for o in values)
    return Damaged(root, shard, reached, spared, elsewhere)


@pytest.fixture(params=list(DAMAGES))
def damaged(request, pristine, tmp_path) -> Damaged:
    return damaged_copy(pristine, tmp_path, DAMAGES[request.param])


def assert_corrupt(call: Callable[[], object], shard: str, ordinal: int | None = None) -> None:
    with pytest.raises(sds.CorruptDatasetError) as raised:
        call()
    message = str(raised.value)
    assert os.path.basename(shard) in message, message
    if ordinal is not None:
        assert re.search(rf"\b{ordinal}\b", message), (ordinal, message)


def is_local(damaged: Damaged) -> bool:
    return bool(damaged.spared)


# -- the tests ----------------------------------------------------------------


def test_reached_records_raise(damaged):
    reader = sds_loader.BatchReader(damaged.root)
    for ordinal in damaged.reached:
        named = ordinal if is_local(damaged) else None
        assert_corrupt(lambda: reader.read([ordinal]), damaged.shard, named)
        assert_corrupt(lambda: reader[ordinal], damaged.shard, named)


def test_reached_records_raise_with_known_fields(damaged):
    """Fields and targets named up front: the layout comes from an intact
    record, and the damaged one is met only while filling the batch."""
    reader = sds_loader.BatchReader(damaged.root, fields=FIELDS, targets=("label",), threads=3)
    intact = damaged.elsewhere[0]
    assert_batch(damaged.root, reader.read([intact]), [intact], FIELDS, ("label",))
    for ordinal in damaged.reached:
        assert_corrupt(lambda: reader.read([intact, ordinal, intact]), damaged.shard)


def test_reached_records_raise_right_after_intact_ones(damaged):
    """One thread that has just read an intact record reads the next chunk the
    way it read that one (uncompressed: straight into the rows, in two reads);
    the damage is caught all the same."""
    reader = sds_loader.BatchReader(damaged.root, fields=FIELDS, threads=1)
    for intact in (damaged.elsewhere[0], *damaged.spared[:1]):
        for ordinal in damaged.reached:
            reader.read([intact])
            assert_corrupt(lambda: reader.read([ordinal]), damaged.shard)


def test_a_batch_meeting_damage_raises_as_a_whole(damaged):
    reader = sds_loader.BatchReader(damaged.root, threads=3)
    batch = damaged.elsewhere[:2] + damaged.spared + damaged.reached + damaged.elsewhere[2:]
    assert_corrupt(lambda: reader.read(batch), damaged.shard)
    assert_corrupt(lambda: reader.read(list(reversed(batch))), damaged.shard)


def test_records_the_damage_does_not_reach(damaged, pristine):
    reader = sds_loader.BatchReader(damaged.root, targets=("label",), threads=3)
    for ordinal in damaged.reached[:1]:
        with pytest.raises(sds.CorruptDatasetError):
            reader.read([ordinal])
    # Neither the failure nor the damaged shard spoils the rest.
    for indices in (damaged.spared + damaged.elsewhere, damaged.elsewhere[::-1]):
        if indices:
            assert_batch(pristine, reader.read(indices), indices, FIELDS, ("label",))
    fresh = sds_loader.BatchReader(damaged.root, targets=("label",))
    everything_else = damaged.elsewhere + damaged.spared
    assert_batch(pristine, fresh.read(everything_else), everything_else, FIELDS, ("label",))


# -- verify_checksums=False ------------------------------------------------------


@pytest.fixture(scope="module")
def uncompressed(tmp_path_factory) -> str:
    """Tensor bytes and record sizes stored as written, so they can be damaged precisely."""
    root = tmp_path_factory.mktemp("uncompressed")
    write_dataset(
        root,
        RECORDS,
        partial(capture, samples=SAMPLES),
        records_per_shard=PER_SHARD,
        writer_options="group_size:1,uncompressed",
    )
    return os.fspath(root)


FLIPPED_BYTE = 5_000


@pytest.fixture
def uncompressed_flip(uncompressed, tmp_path) -> Damaged:
    """One bit flipped inside record 1's tensor bytes."""
    tensor = sds.open(uncompressed)[1]["samples"].data.tobytes()

    def damage(target: Target) -> list[int]:
        flip(target, tensor_byte_offset(target.data, tensor, FLIPPED_BYTE))
        return [1]

    return damaged_copy(uncompressed, tmp_path, damage)


def test_unverified_flip_is_caught_or_confined(uncompressed_flip, uncompressed, record_property):
    """With checksums off, a flipped tensor byte cannot be caught by a hash. The
    reader may still refuse the record; if it returns it, the damage must stay
    exactly where it was done. The native reader, as first built, returns the
    record with that one byte changed (reported as the `unverified_flip`
    property)."""
    damaged, byte = uncompressed_flip, FLIPPED_BYTE
    (ordinal,) = damaged.reached
    verified = sds_loader.BatchReader(damaged.root)
    assert_corrupt(lambda: verified.read([ordinal]), damaged.shard, ordinal)

    unverified = sds_loader.BatchReader(damaged.root, verify_checksums=False)
    indices = [damaged.elsewhere[0], ordinal, damaged.spared[0]]
    try:
        batch = unverified.read(indices)
    except sds.CorruptDatasetError as error:
        assert os.path.basename(damaged.shard) in str(error)
        record_property("unverified_flip", "raised CorruptDatasetError")
        return
    record_property("unverified_flip", "returned the flipped byte")
    expected = np.frombuffer(sds.open(uncompressed)[ordinal]["samples"].data.tobytes(), np.uint8)
    got = np.frombuffer(batch["samples"][1].tobytes(), np.uint8)
    differing = np.flatnonzero(got != expected).tolist()
    assert differing == [byte], differing
    assert got[byte] == expected[byte] ^ 0x40
    assert_batch(uncompressed, {"samples": batch["samples"][[0, 2]]}, [indices[0], indices[2]], FIELDS)


def _size_varint_offset(target: Target) -> int:
    """Record 1's size, the first varint after compression_type and the sizes length."""
    chunk = target.records[1]
    assert target.data[chunk.physical(CHUNK_HEADER_SIZE)] == 0, "expected an uncompressed simple chunk"
    return chunk.physical(CHUNK_HEADER_SIZE + 2)


@pytest.mark.parametrize("direction", ["smaller", "larger"])
def test_unverified_size_damage_is_still_refused(uncompressed, tmp_path, direction):
    """Without hashes a record's stated size still has to add up: a reader must
    check sizes against each other and the chunk before trusting them."""

    def damage(target: Target) -> list[int]:
        offset = _size_varint_offset(target)
        low_bits = target.data[offset] & 0x7F
        candidates = [1 << bit for bit in range(7) if bool(low_bits & (1 << bit)) == (direction == "smaller")]
        flip(target, offset, candidates[0])
        return [1]

    damaged = damaged_copy(uncompressed, tmp_path, damage)
    (ordinal,) = damaged.reached
    reader = sds_loader.BatchReader(damaged.root, verify_checksums=False)
    assert_corrupt(lambda: reader.read([ordinal]), damaged.shard)
    assert_batch(uncompressed, reader.read(damaged.elsewhere), damaged.elsewhere, FIELDS)
