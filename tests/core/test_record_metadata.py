"""Record lengths come from the metadata shards, read natively, equal to what
signal_dataset's own `record_metadata` says, and a damaged metadata shard is
refused by name."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest
import signal_dataset as sds
from sds_factory import WRITER_OPTIONS, record_chunks, write_dataset
from varied_records import COUNT, record_length, varied

from sds_loader import CorruptShardError
from sds_loader.fallback import FallbackReader
from sds_loader.metadata import MetadataShards
from sds_loader.schema import FieldLayout


def source_for(root) -> MetadataShards:
    return MetadataShards(sds.open(os.fspath(root)), FallbackReader(os.fspath(root)))


@pytest.mark.parametrize(
    "options", [*WRITER_OPTIONS, "group_size:1,transpose:true"], ids=lambda o: o or "default"
)
def test_metadata_matches_signal_dataset(tmp_path, options):
    write_dataset(tmp_path, COUNT, varied, records_per_shard=4, writer_options=options)
    dataset = sds.open(os.fspath(tmp_path))
    source = source_for(tmp_path)
    ordinals = np.asarray([10, 0, 3, 3, 7, 4], dtype=np.int64)
    got = source.layouts(ordinals)
    expected = [
        {
            name: FieldLayout(tuple(item.shape), tuple(axis.name for axis in item.axes))
            for name, item in dataset.record_metadata[int(o)].fields.items()
        }
        for o in ordinals
    ]
    assert got == expected
    assert source.lengths(ordinals, "time").tolist() == [record_length(int(o)) for o in ordinals]
    assert source.lengths(ordinals, "channel", ("iq",)).tolist() == [2] * ordinals.size
    with pytest.raises(ValueError, match=r"record 10 has no field with axis 'frequency'"):
        source.lengths(ordinals, "frequency")


def test_damaged_metadata_shard_is_named(tmp_path):
    write_dataset(tmp_path, 4, varied)
    (path,) = glob.glob(os.path.join(tmp_path, "objects", "metadata", "*", "*.arrayrecord"))
    chunk = record_chunks(path)[2]
    with open(path, "r+b") as file:
        file.seek(chunk.physical(60))
        byte = file.read(1)
        file.seek(chunk.physical(60))
        file.write(bytes([byte[0] ^ 0x40]))
    source = source_for(tmp_path)
    assert source.lengths(np.asarray([0, 1, 3]), "time").tolist() == [5, 14, 32]
    with pytest.raises(CorruptShardError, match=rf"shard {path}: record 2 of the shard.*hash"):
        source.layouts(np.asarray([2]))
