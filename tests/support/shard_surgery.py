"""Damage a chunk of a real shard and rewrite its hashes to match the damage.

A hash mismatch is caught before any parser sees the bytes; rewriting the
chunk header and data hashes lets the damage reach the parsers, as it does for
a crafted file or a reader with checksums off. Hashes are Riegeli's: 64-bit
HighwayHash with the key from the Riegeli/records format, computed with
Debian's libhighwayhash (a build dependency of the extension).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import struct
from dataclasses import dataclass

import pytest
from sds_factory import CHUNK_HEADER_SIZE, Chunk

RIEGELI_HASH_KEY = (0x2F696C6567656952, 0x0A7364726F636572, 0x2F696C6567656952, 0x0A7364726F636572)

_hash_function = None


def riegeli_hash(data: bytes) -> int:
    """HighwayHash64 of `data` under Riegeli's key (skips the test when the
    shared library is missing)."""
    global _hash_function
    if _hash_function is None:
        name = ctypes.util.find_library("highwayhash") or "libhighwayhash.so.0"
        try:
            library = ctypes.CDLL(name)
        except OSError:
            pytest.skip("libhighwayhash's shared library is not installed (libhighwayhash-dev)")
        library.HighwayHash64.restype = ctypes.c_uint64
        library.HighwayHash64.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_char_p, ctypes.c_uint64]
        key = (ctypes.c_uint64 * 4)(*RIEGELI_HASH_KEY)
        _hash_function = lambda payload: library.HighwayHash64(key, payload, len(payload))  # noqa: E731
    return _hash_function(bytes(data))


def tensor_byte_offset(data: bytes | bytearray, tensor: bytes, index: int) -> int:
    """The offset in `data` (an uncompressed shard's bytes) of byte `index`
    of a record's `tensor`, found by the 32 bytes around it (fewer at the
    tensor's ends), which must occur in the shard exactly once."""
    start = max(0, index - 16)
    window = tensor[start : index + 16]
    offset = data.find(window)
    assert offset >= 0 and data.find(window, offset + 1) < 0, "tensor bytes not found exactly once"
    return offset + index - start


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def read_varint(data: bytes, position: int) -> tuple[int, int]:
    """The varint at `position` and the position after it."""
    value = shift = 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, position


@dataclass(frozen=True)
class ChunkHeader:
    data_size: int
    data_hash: int
    chunk_type: int
    num_records: int
    decoded_data_size: int

    def pack(self) -> bytes:
        fields = struct.pack(
            "<QQQQ",
            self.data_size,
            self.data_hash,
            self.chunk_type | (self.num_records << 8),
            self.decoded_data_size,
        )
        return struct.pack("<Q", riegeli_hash(fields)) + fields


@dataclass(frozen=True)
class SimpleChunkLayout:
    """Where the parts of a simple chunk's data lie (offsets into the data)."""

    compression: int
    sizes_begin: int  # the compressed (or plain) record sizes
    sizes_end: int
    values_begin: int  # the values, after their decoded-size prefix when compressed
    values_end: int


def simple_chunk_layout(payload: bytes) -> SimpleChunkLayout:
    sizes_size, sizes_begin = read_varint(payload, 1)
    sizes_end = sizes_begin + sizes_size
    values_begin = sizes_end
    if payload[0] != 0:
        _, values_begin = read_varint(payload, sizes_end)
    return SimpleChunkLayout(payload[0], sizes_begin, sizes_end, values_begin, len(payload))


class ShardImage:
    """A shard's bytes in memory, edited chunk by chunk, then written back."""

    def __init__(self, path: str) -> None:
        self.path = path
        with open(path, "rb") as file:
            self.data = bytearray(file.read())

    def _positions(self, chunk: Chunk) -> list[int]:
        return [chunk.physical(k) for k in range(CHUNK_HEADER_SIZE + chunk.data_size)]

    def chunk(self, chunk: Chunk) -> tuple[ChunkHeader, bytes]:
        raw = bytes(self.data[p] for p in self._positions(chunk))
        _, data_size, data_hash, type_and_records, decoded = struct.unpack("<QQQQQ", raw[:CHUNK_HEADER_SIZE])
        header = ChunkHeader(data_size, data_hash, type_and_records & 0xFF, type_and_records >> 8, decoded)
        return header, raw[CHUNK_HEADER_SIZE:]

    def replace(self, chunk: Chunk, header: ChunkHeader, payload: bytes) -> None:
        """Write `header` and `payload` over `chunk`, with both hashes made to
        match. The payload keeps the chunk's size, so every offset stays valid."""
        if len(payload) != chunk.data_size:
            raise ValueError(f"payload of {len(payload)} bytes for a chunk of {chunk.data_size}")
        header = ChunkHeader(
            len(payload),
            riegeli_hash(payload),
            header.chunk_type,
            header.num_records,
            header.decoded_data_size,
        )
        for position, byte in zip(self._positions(chunk), header.pack() + payload, strict=True):
            self.data[position] = byte

    def save(self, path: str | None = None) -> None:
        with open(path or self.path, "wb") as file:
            file.write(self.data)


# -- whole records, rewritten through array_record's own writer ---------------


def read_payloads(path: str) -> list[bytes]:
    """Every record of a shard, as stored."""
    from array_record.python.array_record_data_source import ArrayRecordDataSource

    source = ArrayRecordDataSource([path])
    try:
        return [source[i] for i in range(len(source))]
    finally:
        source.__exit__(None, None, None)


def write_payloads(path: str, payloads: list[bytes], options: str = "group_size:1") -> None:
    """Replace a shard with `payloads`, written (and hashed) by array_record
    itself, so that only the records' contents differ from a real shard."""
    from array_record.python.array_record_module import ArrayRecordWriter

    writer = ArrayRecordWriter(path + ".new", options)
    for payload in payloads:
        writer.write(payload)
    writer.close()
    import os

    os.replace(path + ".new", path)


def safetensors_parts(payload: bytes) -> tuple[dict, bytes]:
    """A record's SafeTensors header (parsed) and the data after it."""
    import json

    (size,) = struct.unpack("<Q", payload[:8])
    return json.loads(payload[8 : 8 + size]), payload[8 + size :]


def safetensors_record(header: dict, data: bytes) -> bytes:
    import json

    text = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(text)) + text + data


def with_descriptor(payload: bytes, edit) -> bytes:
    """The record with its descriptor JSON replaced by `edit(descriptor)`'s
    result (a dict, or bytes taken as they are), tensors unchanged."""
    import json

    header, data = safetensors_parts(payload)
    begin, end = header["__sds_descriptor__"]["data_offsets"]
    descriptor = edit(json.loads(data[begin:end]))
    text = descriptor if isinstance(descriptor, bytes) else json.dumps(descriptor).encode()
    tensors = {
        key: data[spec["data_offsets"][0] : spec["data_offsets"][1]]
        for key, spec in header.items()
        if key != "__metadata__"
    }
    tensors["__sds_descriptor__"] = text
    new_header, new_data, offset = {}, b"", 0
    for key, spec in header.items():
        if key == "__metadata__":
            continue
        blob = tensors[key]
        shape = [len(blob)] if key == "__sds_descriptor__" else spec["shape"]
        new_header[key] = {
            "dtype": spec["dtype"],
            "shape": shape,
            "data_offsets": [offset, offset + len(blob)],
        }
        new_data += blob
        offset += len(blob)
    return safetensors_record(new_header, new_data)


def one_shard_dataset(root, records: int = 3) -> tuple:
    """A dataset of `records` records in one shard, written by signal_dataset, and its payloads."""
    from sds_factory import data_shards, write_dataset

    write_dataset(root, records)
    (shard,) = data_shards(root)
    return root, read_payloads(shard)


def with_record_replaced(pristine: tuple, folder, victim: int, payload: bytes) -> tuple:
    """A copy of `pristine` (from one_shard_dataset) in `folder`, record `victim`
    replaced by `payload`, rewritten by array_record; returns (root, shard)."""
    import shutil

    from sds_factory import data_shards

    root, payloads = pristine
    target = folder / "dataset"
    shutil.copytree(root, target)
    (shard,) = data_shards(target)
    payloads = list(payloads)
    payloads[victim] = payload
    write_payloads(shard, payloads)
    return target, shard
