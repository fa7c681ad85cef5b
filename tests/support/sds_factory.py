"""Write small SDS datasets with signal_dataset itself, for tests to read back.

Every fidelity test compares against `signal_dataset.open(root)`, so datasets
are written through signal_dataset's public writer, never by hand.
"""

from __future__ import annotations

import glob
import os
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import signal_dataset as sds

#: Every layout signal_dataset's writer produces that the native core reads.
WRITER_OPTIONS = [
    None,  # signal_dataset's default: group_size:1, zstd
    "group_size:1",
    "group_size:1,uncompressed",
    "group_size:1,snappy",
    "group_size:1,brotli:6",
    "group_size:8,zstd:3",
    "group_size:4,uncompressed",
    "group_size:4,snappy",
    "group_size:3,brotli:6",
]

#: Builds record `ordinal` of a dataset.
RecordMaker = Callable[[int], sds.Record]


def field(data: np.ndarray, axis_prefix: str = "a") -> sds.Field:
    """A Field with one named axis per dimension, as signal_dataset requires."""
    axes = tuple(sds.Axis(f"{axis_prefix}{k}", int(n)) for k, n in enumerate(data.shape))
    return sds.Field(data, axes=axes)


def capture(ordinal: int, *, channels: int = 2, samples: int = 256, classes: int = 4) -> sds.Record:
    """A complex64 capture with an integer label and a float SNR, seeded by ordinal."""
    rng = np.random.default_rng(ordinal)
    shape = (channels, samples)
    data = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
    return sds.Record(
        id=f"capture-{ordinal:06d}",
        fields={"samples": field(data)},
        metadata={"label": ordinal % classes, "snr_db": float(rng.uniform(-5, 20))},
    )


def write_dataset(
    root: str | os.PathLike,
    count: int,
    make: RecordMaker = capture,
    *,
    records_per_shard: int | None = None,
    writer_options: str | Sequence[str | None] | None = None,
    shards_per_manifest: int | None = None,
) -> sds.Dataset:
    """Publish `count` records made by `make`, split into shards of equal size.

    `writer_options` is one ArrayRecord options string for every shard, or a
    sequence with one entry per shard (None for signal_dataset's default), so
    that one dataset can mix shard layouts.
    """
    root = os.fspath(root)
    per_shard = records_per_shard or max(count, 1)
    starts = range(0, count, per_shard)
    if writer_options is None or isinstance(writer_options, str):
        per_shard_options: Sequence[str | None] = [writer_options] * len(starts)
    else:
        per_shard_options = list(writer_options)
        if len(per_shard_options) != len(starts):
            raise ValueError(
                f"writer_options names {len(per_shard_options)} shards; this dataset has {len(starts)}"
            )
    shards = []
    for shard_number, (start, options) in enumerate(zip(starts, per_shard_options, strict=True)):
        stop = min(start + per_shard, count)
        records: Iterator[sds.Record] = (make(i) for i in range(start, stop))
        storage = sds.StorageOptions(writer_options=options) if options else None
        shards.append(sds.write_shard(records, root, work_id=f"{shard_number:06d}", options=storage))
    publication = (
        sds.PublicationOptions(shards_per_manifest=shards_per_manifest) if shards_per_manifest else None
    )
    return sds.publish(
        root,
        shards,
        dataset_id="test",
        snapshot_id="v1",
        publication_options=publication,
    )


def data_shards(root: str | os.PathLike) -> list[str]:
    """The data shard files of a dataset, in a stable order."""
    return sorted(glob.glob(os.path.join(os.fspath(root), "objects", "data", "*", "*.arrayrecord")))


def shard_ordinals(root: str | os.PathLike) -> dict[str, list[int]]:
    """Each data shard file's path, mapped to the ordinals of its records in shard order."""
    dataset = sds.open(os.fspath(root))
    owners: dict[str, list[int]] = {}
    for instruction in dataset.read_instructions(0, len(dataset)):
        path = instruction.filename.removeprefix("file://")
        ordinals = owners.setdefault(path, [])
        ordinals.extend(range(instruction.first_ordinal, instruction.first_ordinal + instruction.take))
    return owners


# -- Riegeli layout, for tests that place records or damage precisely --------
#
# Written from the public Riegeli/records file format specification: 64 KiB
# blocks, each opening with a 24-byte block header; chunks with a 40-byte
# header that block headers may interrupt anywhere.

BLOCK_SIZE = 1 << 16
BLOCK_HEADER_SIZE = 24
CHUNK_HEADER_SIZE = 40
_USABLE_BLOCK_SIZE = BLOCK_SIZE - BLOCK_HEADER_SIZE


@dataclass(frozen=True)
class Chunk:
    """One chunk of a Riegeli file; positions are physical file offsets."""

    begin: int
    end: int
    chunk_type: str
    data_size: int
    num_records: int
    decoded_data_size: int

    def physical(self, offset: int) -> int:
        """The file offset of byte `offset` of this chunk, counted from its header,
        skipping the block headers that interrupt it."""
        return logical_to_physical(self.begin, offset)


def logical_to_physical(begin: int, offset: int) -> int:
    position = begin
    remaining = offset
    while True:
        if position % BLOCK_SIZE < BLOCK_HEADER_SIZE:
            position += BLOCK_HEADER_SIZE - position % BLOCK_SIZE
        room = BLOCK_SIZE - position % BLOCK_SIZE
        if remaining < room:
            return position + remaining
        position += room
        remaining -= room


def _add_with_overhead(position: int, size: int) -> int:
    blocks = (size + (position + _USABLE_BLOCK_SIZE - 1) % BLOCK_SIZE) // _USABLE_BLOCK_SIZE
    return position + size + blocks * BLOCK_HEADER_SIZE


def _round_up_to_possible_chunk_boundary(position: int) -> int:
    remaining_in_block = BLOCK_SIZE - 1 - (position + BLOCK_SIZE - 1) % BLOCK_SIZE
    return position + max(remaining_in_block - (_USABLE_BLOCK_SIZE - 1), 0)


def read_chunks(path: str | os.PathLike) -> list[Chunk]:
    """Walk every chunk of an intact Riegeli file from its start."""
    with open(path, "rb") as file:
        data = file.read()
    chunks = []
    begin = 0
    while begin < len(data):
        header = bytes(data[logical_to_physical(begin, k)] for k in range(CHUNK_HEADER_SIZE))
        _, data_size, _, type_and_records, decoded = struct.unpack("<QQQQQ", header)
        num_records = type_and_records >> 8
        end = max(
            _add_with_overhead(begin, CHUNK_HEADER_SIZE + data_size),
            _round_up_to_possible_chunk_boundary(begin + num_records),
        )
        chunks.append(Chunk(begin, end, chr(type_and_records & 0xFF), data_size, num_records, decoded))
        begin = end
    return chunks


def record_chunks(path: str | os.PathLike) -> list[Chunk]:
    """The chunks holding records, in record order (signature, padding, footer and
    postscript excluded). The footer is the last `r` chunk before the final block."""
    chunks = read_chunks(path)
    records = [chunk for chunk in chunks if chunk.chunk_type == "r"]
    # The postscript fills the last block; the footer index precedes it.
    return records[:-2]


def assert_matches_reference(
    root: str | os.PathLike,
    batch: dict[str, np.ndarray],
    indices: Sequence[int],
    fields: Sequence[str],
    targets: Sequence[str] = (),
) -> None:
    """Every row equals signal_dataset's record, byte for byte."""
    reference = sds.open(os.fspath(root))
    for row, index in enumerate(indices):
        record = reference[index]
        for name in fields:
            expected = record[name].data
            got = batch[name][row]
            assert got.dtype == expected.dtype, (index, name, got.dtype, expected.dtype)
            assert got.shape == expected.shape, (index, name, got.shape, expected.shape)
            assert got.tobytes() == expected.tobytes(), (index, name)
        for key in targets:
            assert batch[key][row] == record.metadata[key], (index, key)


def assert_batch(
    root: str | os.PathLike,
    batch: dict[str, np.ndarray],
    indices: Sequence[int],
    fields: Sequence[str],
    targets: Sequence[str] = (),
) -> None:
    """The batch holds exactly `fields` and `targets`, one row per index, each row
    equal to signal_dataset's record byte for byte."""
    assert set(batch) == set(fields) | set(targets), sorted(batch)
    for name, array in batch.items():
        assert isinstance(array, np.ndarray), (name, type(array))
        assert array.shape[:1] == (len(indices),), (name, array.shape, len(indices))
        assert array.flags.c_contiguous, name
    for key in targets:
        assert batch[key].ndim == 1, (key, batch[key].shape)
    assert_matches_reference(root, batch, indices, fields, targets)
