"""Edge cases of the native parsers and of out=, each crafted to reach one check.

* A SafeTensors header whose parse fails part way leaves no table a later
  record could reuse, though the worker's scratch goes back to the pool.
* Block headers inside a chunk must point at that chunk's boundaries.
* out= buffers that share memory are refused before anything is written;
  after a corruption error the buffers are still the caller's, and the next
  read into them fills every row.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from functools import partial

import numpy as np
import pytest
import signal_dataset as sds
from sds_factory import BLOCK_SIZE, assert_matches_reference, capture, data_shards, read_chunks, write_dataset
from shard_surgery import (
    ShardImage,
    read_payloads,
    riegeli_hash,
    safetensors_parts,
    simple_chunk_layout,
    write_payloads,
)

import sds_loader

FIELDS = ["samples"]


def test_failed_header_parse_leaves_no_table_for_the_next_record(tmp_path):
    """Record 0's header fails after two of its tensors are parsed; record 1
    has an empty header and the data size of record 2, read just before. A
    cache that kept record 0's half-built table would decode record 1 with it."""
    root = tmp_path / "dataset"
    write_dataset(root, 3)
    (shard,) = data_shards(root)
    payloads = read_payloads(shard)
    header, data = safetensors_parts(payloads[2])
    # Record 2's tensors laid out in key order, so that the table as parsed
    # so far (keys are visited in order) is already sorted by offset.
    blobs = {
        key: data[slice(*header[key]["data_offsets"])] for key in ("__sds_descriptor__", "tensor_000000")
    }
    half, offset = {}, 0
    for key, blob in blobs.items():
        half[key] = {**header[key], "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
    data = b"".join(blobs.values())
    half["zzz"] = 5  # parsed last, and not a tensor: the parse fails here
    text = json.dumps(half).encode()
    payloads[0] = struct.pack("<Q", len(text)) + text + data
    payloads[1] = struct.pack("<Q", 0) + data
    write_payloads(shard, payloads)

    reference = sds.open(os.fspath(root))
    for ordinal in (0, 1):
        # signal_dataset's SafeTensors decoder refuses the header.
        with pytest.raises(sds.errors.ValidationError, match="SafeTensors header|tensor header"):
            reference[ordinal]["samples"]
    reader = sds_loader.BatchReader(root, fields=FIELDS, threads=1)
    assert_matches_reference(root, reader.read([2]), [2], FIELDS)
    for ordinal in (0, 1):
        with pytest.raises(sds_loader.CorruptShardError, match=rf"\brecord {ordinal}\b"):
            reader.read([ordinal])


def test_block_header_pointing_past_its_chunk_is_corrupt(tmp_path):
    root = tmp_path / "dataset"
    write_dataset(root, 3, partial(capture, channels=4, samples=4096))  # 128 KiB records
    (shard,) = data_shards(root)
    chunks = read_chunks(shard)
    spanning = next(
        c for c in chunks if c.chunk_type == "r" and c.begin // BLOCK_SIZE != (c.end - 1) // BLOCK_SIZE
    )
    block = (spanning.begin // BLOCK_SIZE + 1) * BLOCK_SIZE
    with open(shard, "rb") as file:
        data = bytearray(file.read())
    previous, following = struct.unpack_from("<QQ", data, block + 8)
    assert (previous, following) == (block - spanning.begin, spanning.end - block)
    fields = struct.pack("<QQ", previous, following + 1)
    data[block : block + 24] = struct.pack("<Q", riegeli_hash(fields)) + fields
    with open(shard, "wb") as file:
        file.write(data)
    for verify in (True, False):
        reader = sds_loader.BatchReader(root, fields=FIELDS, verify_checksums=verify)
        with pytest.raises(sds_loader.CorruptShardError) as raised:
            reader.read(list(range(3)))
        message = str(raised.value)
        assert os.path.basename(shard) in message and "block header" in message, message


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    root = tmp_path_factory.mktemp("small") / "dataset"
    write_dataset(root, 6)
    return root


def test_out_buffers_sharing_memory_are_refused(small):
    reader = sds_loader.BatchReader(small, fields=FIELDS, targets=["label"])
    shape = reader.read([0])["samples"].shape[1:]
    samples = np.zeros((4, *shape), np.complex64)
    sentinel = samples.copy()
    # The label buffer is a view into the samples buffer's memory.
    labels = samples.view(np.int64).reshape(-1)[:4]
    with pytest.raises(ValueError, match="share memory"):
        reader.read([0, 1, 2, 3], out={"samples": samples, "label": labels})
    assert np.array_equal(samples, sentinel), "nothing may be written before the refusal"
    # Disjoint parts of one allocation are fine.
    block = np.zeros(4 * 8 + samples.nbytes, np.uint8)
    labels = block[: 4 * 8].view(np.int64)
    rows = block[4 * 8 :].view(np.complex64).reshape(samples.shape)
    batch = reader.read([3, 2, 1, 0], out={"samples": rows, "label": labels})
    assert_matches_reference(small, batch, [3, 2, 1, 0], FIELDS, ["label"])


def test_out_after_a_corruption_error(tmp_path, small):
    root = tmp_path / "dataset"
    shutil.copytree(small, root)
    (shard,) = data_shards(root)
    payloads = read_payloads(shard)
    payloads[4] = payloads[4][:8] + b"[" + payloads[4][9:]  # the header is no longer JSON
    write_payloads(shard, payloads)
    reader = sds_loader.BatchReader(root, fields=FIELDS, threads=1)
    shape = reader.read([0])["samples"].shape[1:]
    out = {"samples": np.full((3, *shape), 7, np.complex64)}
    with pytest.raises(sds_loader.CorruptShardError, match=r"\brecord 4\b") as raised:
        reader.read([1, 4, 2], out=out)
    assert os.path.basename(shard) in str(raised.value)
    # The buffer is still the caller's: same memory, shape and dtype; rows
    # the read did reach hold records, the rest are as they were or undefined,
    # as BatchReader.read documents. The next read into it fills every row.
    assert out["samples"].shape == (3, *shape) and out["samples"].dtype == np.complex64
    batch = reader.read([5, 0, 3], out=out)
    assert batch["samples"] is out["samples"] or np.shares_memory(batch["samples"], out["samples"])
    assert_matches_reference(root, batch, [5, 0, 3], FIELDS)


def test_footer_of_another_array_record_version_is_corrupt(tmp_path):
    root = tmp_path / "dataset"
    write_dataset(root, 3, writer_options="group_size:1,uncompressed")  # an uncompressed footer
    (shard,) = data_shards(root)
    footer = [chunk for chunk in read_chunks(shard) if chunk.chunk_type == "r"][-2]
    image = ShardImage(shard)
    header, payload = image.chunk(footer)
    values = simple_chunk_layout(payload).values_begin
    # RiegeliFooterMetadata: field 1 (array_record_metadata), length, then its field 1 (version).
    assert payload[values] == 0x0A and payload[values + 2 : values + 4] == b"\x08\x01", payload[
        values : values + 8
    ]
    image.replace(footer, header, payload[: values + 3] + b"\x02" + payload[values + 4 :])
    image.save()
    with pytest.raises(sds_loader.CorruptShardError, match="version 2") as raised:
        sds_loader.BatchReader(root, fields=FIELDS).read([0])
    assert os.path.basename(shard) in str(raised.value)
