"""A verified read of an uncompressed chunk hashes each piece as it copies it
into rows (out of the shard's mapping, in one pass). These records span
several 64 KiB Riegeli blocks, so that their tensors reach the rows in pieces
cut by block headers, and the hash must still cover exactly the chunk's data:
every byte of it, in order, and nothing of the block headers between."""

from __future__ import annotations

import os
import shutil
from functools import partial

import numpy as np
import pytest
import signal_dataset as sds
from native_required import _native  # noqa: F401 - a build without it fails the run (conftest.py)
from sds_factory import assert_matches_reference, capture, shard_ordinals, write_dataset
from shard_surgery import tensor_byte_offset

import sds_loader
from sds_loader.errors import CorruptShardError

RECORDS = 12
PER_SHARD = 6
# 2 x 12,000 complex64: 192,000 bytes a record, over three Riegeli blocks.
SAMPLES = 12_000
FIELDS = ("samples",)


@pytest.fixture(scope="module")
def multi_block(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("multi-block")
    write_dataset(
        root,
        RECORDS,
        partial(capture, samples=SAMPLES),
        records_per_shard=PER_SHARD,
        writer_options="group_size:1,uncompressed",
    )
    return os.fspath(root)


def test_records_over_several_blocks_read_byte_exact(multi_block):
    order = np.random.default_rng(3).permutation(RECORDS)
    reader = sds_loader.BatchReader(multi_block, fields=FIELDS, targets=("label",), threads=1)
    for repeat in range(2):  # the second from mappings whose pages are mapped
        batch = reader.read(order)
        assert_matches_reference(multi_block, batch, order.tolist(), FIELDS, ("label",))
    assert reader.stats.native_records == 2 * RECORDS


def _copy_with_flip(root: str, destination, ordinal: int, at: int) -> tuple[str, str]:
    """A copy of the dataset with one bit flipped at byte `at` of record
    `ordinal`'s samples tensor (negative: from its end). Returns the copy and
    the damaged shard's path."""
    copy = os.fspath(destination / "copy")
    shutil.copytree(root, copy)
    tensor = sds.open(copy)[ordinal]["samples"].data.tobytes()
    shard = next(path for path, owned in shard_ordinals(copy).items() if ordinal in owned)
    with open(shard, "rb") as file:
        data = bytearray(file.read())
    data[tensor_byte_offset(data, tensor, at if at >= 0 else len(tensor) + at)] ^= 0x20
    with open(shard, "wb") as file:
        file.write(data)
    return copy, shard


# The tensor's first byte (read with the chunk's first bytes), one inside
# each later block, and its last byte.
@pytest.mark.parametrize("at", [0, 70_000, 140_000, -1])
def test_a_flipped_tensor_byte_fails_the_hash_wherever_it_lies(multi_block, tmp_path, at):
    copy, shard = _copy_with_flip(multi_block, tmp_path, 1, at)
    reader = sds_loader.BatchReader(copy, fields=FIELDS, threads=1)
    # Intact records of the same shard still read, before and after.
    assert_matches_reference(copy, reader.read([0, 2]), [0, 2], FIELDS, ())
    with pytest.raises(CorruptShardError, match="fails its hash check") as raised:
        reader.read([0, 1, 2])
    assert os.path.basename(shard) in str(raised.value)
    assert_matches_reference(copy, reader.read([2, 0]), [2, 0], FIELDS, ())
    # Without checksums the flip reaches the row, and only it.
    unverified = sds_loader.BatchReader(copy, fields=FIELDS, threads=1, verify_checksums=False)
    got = unverified.read([1])["samples"][0].view(np.uint8).ravel()
    intact = sds.open(multi_block)[1]["samples"].data.view(np.uint8).ravel()
    assert np.flatnonzero(got != intact).tolist() == [at if at >= 0 else intact.size + at]
