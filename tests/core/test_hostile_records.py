"""Hostile SafeTensors headers inside otherwise valid shards.

Each case writes, with array_record's own writer, a shard whose ArrayRecord
framing is intact (hashes, footer, postscript) but whose middle record is a
SafeTensors blob built by hand to lie: offsets past the record, overlapping
ranges, sizes that overflow, unknown dtypes, duplicate keys, deep nesting, a
header length larger than the record. The file replaces a data shard that
signal_dataset wrote, with the same number of records. signal_dataset's
manifest pins each shard's record count, not its bytes: `sds.open` and
`read_instructions` do not look at the file, so the dataset still names it.

Every read that reaches the hostile record must raise CorruptShardError (a
signal_dataset.CorruptDatasetError) naming the shard file and the record's
ordinal; its neighbours still read back intact.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
from functools import partial

import pytest
import signal_dataset as sds
from array_record.python.array_record_module import ArrayRecordReader, ArrayRecordWriter
from native_required import _native  # noqa: F401,E402 - a build without it fails the run (conftest.py)
from sds_factory import assert_batch, capture, shard_ordinals, write_dataset

import sds_loader

FIELDS = ("samples",)
PER_SHARD = 3
#: The hostile record is the middle one of the second shard.
LOCAL = 1


def split_record(record: bytes) -> tuple[dict, bytes]:
    (length,) = struct.unpack_from("<Q", record)
    return json.loads(record[8 : 8 + length]), record[8 + length :]


def pack(header: dict | bytes, data: bytes, length: int | None = None) -> bytes:
    text = header if isinstance(header, bytes) else json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(text) if length is None else length) + text + data


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> tuple[str, str, list[int], list[bytes]]:
    """A pristine two-shard dataset, its second shard's path, ordinals and raw records."""
    root = tmp_path_factory.mktemp("hostile-template")
    write_dataset(root, 2 * PER_SHARD, partial(capture, samples=8), records_per_shard=PER_SHARD)
    owners = shard_ordinals(root)
    shard = next(path for path, ordinals in owners.items() if PER_SHARD in ordinals)
    reader = ArrayRecordReader(shard)
    try:
        records = [bytes(record) for record in reader.read_all()]
    finally:
        reader.close()
    assert len(records) == PER_SHARD
    return os.fspath(root), shard, owners[shard], records


def _valid_parts(records: list[bytes]) -> tuple[dict, bytes]:
    header, data = split_record(records[LOCAL])
    assert set(header) == {"tensor_000000", "__sds_descriptor__"}, header
    return header, data


def _with(header: dict, key: str, **changes) -> dict:
    changed = json.loads(json.dumps(header))
    changed[key].update(changes)
    return changed


def offsets_past_the_record(header, data):
    end = len(data) + 8
    return pack(_with(header, "__sds_descriptor__", data_offsets=[end - 16, end]), data)


def tensor_past_the_record(header, data):
    return pack(_with(header, "tensor_000000", data_offsets=[len(data), len(data) + 128]), data)


def overlapping_ranges(header, data):
    begin, end = header["__sds_descriptor__"]["data_offsets"]
    tensor_end = header["tensor_000000"]["data_offsets"][1]
    return pack(_with(header, "__sds_descriptor__", data_offsets=[tensor_end - 8, end - 8]), data)


def shape_times_itemsize_overflows(header, data):
    # 2**61 complex64 items of 8 bytes wrap to 0 in 64 bits.
    return pack(_with(header, "tensor_000000", shape=[2**61], data_offsets=[0, 0]), data)


def shape_product_overflows(header, data):
    return pack(_with(header, "tensor_000000", shape=[2**32, 2**32, 2]), data)


def offsets_near_two_to_the_64(header, data):
    return pack(_with(header, "tensor_000000", shape=[2**61 - 1], data_offsets=[8, 2**64 - 1 - 7]), data)


def offset_beyond_u64(header, data):
    return pack(_with(header, "tensor_000000", data_offsets=[0, 2**64 + 128]), data)


def negative_offset(header, data):
    return pack(_with(header, "tensor_000000", data_offsets=[-128, 0]), data)


def negative_dimension(header, data):
    return pack(_with(header, "tensor_000000", shape=[-2, -8]), data)


def unknown_dtype(header, data):
    return pack(_with(header, "tensor_000000", dtype="C128"), data)


def dtype_not_a_string(header, data):
    return pack(_with(header, "tensor_000000", dtype=8), data)


def duplicate_keys(header, data):
    text = json.dumps(header, separators=(",", ":"))
    tensor = json.dumps(header["tensor_000000"], separators=(",", ":"))
    doubled = text[:-1] + ',"tensor_000000":' + tensor + "}"
    return pack(doubled.encode(), data)


def duplicate_keys_inside_a_tensor(header, data):
    spec = header["tensor_000000"]
    shape, offsets = json.dumps(spec["shape"]), json.dumps(spec["data_offsets"])
    inner = f'{{"dtype":"C64","dtype":"U8","shape":{shape},"data_offsets":{offsets}}}'
    descriptor = json.dumps(header["__sds_descriptor__"], separators=(",", ":"))
    return pack(f'{{"tensor_000000":{inner},"__sds_descriptor__":{descriptor}}}'.encode(), data)


def deeply_nested_json(header, data):
    deep = "[" * 100_000 + "]" * 100_000
    text = json.dumps(header, separators=(",", ":"))[:-1] + ',"__metadata__":{"x":' + deep + "}}"
    return pack(text.encode(), data)


def deeply_nested_descriptor(header, data):
    begin, end = header["__sds_descriptor__"]["data_offsets"]
    tensor_end = header["tensor_000000"]["data_offsets"][1]
    descriptor = json.loads(data[begin:end])
    deep = ("[" * 50_000 + "]" * 50_000).encode()
    text = json.dumps(descriptor, separators=(",", ":")).encode()[:-1] + b',"deep":' + deep + b"}"
    changed = _with(
        header, "__sds_descriptor__", shape=[len(text)], data_offsets=[tensor_end, tensor_end + len(text)]
    )
    return pack(changed, data[:tensor_end] + text)


def header_length_larger_than_the_record(header, data):
    text = json.dumps(header, separators=(",", ":")).encode()
    return pack(text, data, length=len(text) + len(data) + 1)


def header_length_near_two_to_the_64(header, data):
    return pack(json.dumps(header).encode(), data, length=2**64 - 8)


def header_not_json(header, data):
    return pack(b'{"tensor_000000": {"dtype": "C64", ' + b"\xff" * 16, data)


def header_with_a_nul_after_the_object(header, data):
    # A parser that reads NUL as the end of its input would stop here.
    return pack(json.dumps(header, separators=(",", ":")).encode() + b"\x00 {}", data)


def descriptor_with_a_nul_after_the_document(header, data):
    begin, end = header["__sds_descriptor__"]["data_offsets"]
    text = data[begin:end] + b"\x00"
    changed = _with(header, "__sds_descriptor__", shape=[len(text)], data_offsets=[begin, begin + len(text)])
    return pack(changed, data[:begin] + text + data[end:])


def header_not_an_object(header, data):
    return pack(b"[1, 2, 3]", data)


def record_shorter_than_its_length(header, data):
    return b"\x10\x00\x00"


def descriptor_not_json(header, data):
    begin, end = header["__sds_descriptor__"]["data_offsets"]
    return pack(header, data[:begin] + b"\x00" * (end - begin) + data[end:])


def descriptor_missing(header, data):
    changed = {"tensor_000000": header["tensor_000000"]}
    return pack(changed, data[: header["tensor_000000"]["data_offsets"][1]])


CASES = [
    offsets_past_the_record,
    tensor_past_the_record,
    overlapping_ranges,
    shape_times_itemsize_overflows,
    shape_product_overflows,
    offsets_near_two_to_the_64,
    offset_beyond_u64,
    negative_offset,
    negative_dimension,
    unknown_dtype,
    dtype_not_a_string,
    duplicate_keys,
    duplicate_keys_inside_a_tensor,
    deeply_nested_json,
    deeply_nested_descriptor,
    header_length_larger_than_the_record,
    header_length_near_two_to_the_64,
    header_not_json,
    header_not_an_object,
    header_with_a_nul_after_the_object,
    descriptor_with_a_nul_after_the_document,
    record_shorter_than_its_length,
    descriptor_not_json,
    descriptor_missing,
]


@pytest.fixture(params=CASES, ids=[case.__name__ for case in CASES])
def hostile(request, template, tmp_path) -> tuple[str, str, int, list[int]]:
    """A copy of the template whose second shard holds the hostile record."""
    root, shard, ordinals, records = template
    copy = os.fspath(tmp_path / "dataset")
    shutil.copytree(root, copy)
    path = os.path.join(copy, os.path.relpath(shard, root))
    header, data = _valid_parts(records)
    replaced = list(records)
    replaced[LOCAL] = request.param(header, data)
    os.unlink(path)
    writer = ArrayRecordWriter(path, "group_size:1")
    for record in replaced:
        writer.write(record)
    writer.close()
    others = [o for o in range(2 * PER_SHARD) if o != ordinals[LOCAL]]
    return copy, path, ordinals[LOCAL], others


def assert_corrupt_shard(call, shard: str, ordinal: int) -> None:
    with pytest.raises(sds_loader.CorruptShardError) as raised:
        call()
    assert isinstance(raised.value, sds.CorruptDatasetError)
    message = str(raised.value)
    assert os.path.basename(shard) in message, message
    assert re.search(rf"\brecord {ordinal}\b", message), (ordinal, message)


def test_batch_with_the_hostile_record_raises(hostile):
    root, shard, ordinal, others = hostile
    reader = sds_loader.BatchReader(root, fields=FIELDS)
    batch = reader.read(others)  # learns the layout from intact records
    assert_batch(root, batch, others, FIELDS)
    assert_corrupt_shard(lambda: reader.read([others[0], ordinal, others[-1]]), shard, ordinal)
    assert reader.stats.fallback_records == 0
    # The reader stays usable after the error.
    assert_batch(root, reader.read(others[::-1]), others[::-1], FIELDS)


def test_hostile_record_read_first_raises(hostile):
    root, shard, ordinal, _ = hostile
    assert_corrupt_shard(lambda: sds_loader.BatchReader(root).read([ordinal]), shard, ordinal)
    assert_corrupt_shard(lambda: sds_loader.BatchReader(root, fields=FIELDS)[ordinal], shard, ordinal)


def test_hostile_record_on_a_single_thread(hostile):
    root, shard, ordinal, others = hostile
    reader = sds_loader.BatchReader(root, fields=FIELDS, threads=1, verify_checksums=False)
    reader.read(others[:1])
    assert_corrupt_shard(lambda: reader.read(others + [ordinal]), shard, ordinal)
