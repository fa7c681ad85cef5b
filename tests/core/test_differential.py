"""Damaged shards, read by signal_dataset and by BatchReader side by side.

One record chunk of a real shard is damaged (chunk header fields, record
sizes, SafeTensors headers, descriptors, tensor bytes, compressed bytes) and
its header and data hashes are rewritten to match, so that the damage reaches
the parsers as it would from a crafted file. Every record is then read with
both readers. sds_loader may refuse a record signal_dataset reads only for
one of the named, documented reasons in stricter.py (those cases are counted
and printed; any other refusal fails), and whatever it returns must be what
signal_dataset returns, and where signal_dataset raises, only the pristine
record.

The default run takes a fixed sample of damages per layout; set
SDS_LOADER_LONG_DIFFERENTIAL=1 for every byte of the chunk, two bits each, over
more layouts (an hour on two cores).
"""

from __future__ import annotations

import collections
import os
import random
import shutil
import zlib
from functools import partial

import numpy as np
import pytest
import signal_dataset as sds
from repo_paths import REPO
from sds_factory import assert_matches_reference, capture, data_shards, field, record_chunks, write_dataset
from shard_surgery import ChunkHeader, ShardImage, simple_chunk_layout
from stricter import STRICTER, stricter_class

import sds_loader

LONG = os.environ.get("SDS_LOADER_LONG_DIFFERENTIAL") == "1"
RECORDS = 4
VICTIM_CHUNK = 1

LAYOUTS = [
    "group_size:1",
    "group_size:3,zstd:3",
    "group_size:1,zstd:19,window_log:30",
    "group_size:1,uncompressed",
    "group_size:2,uncompressed",
    "group_size:2,snappy",
    "group_size:1,brotli:6",
]
if LONG:
    LAYOUTS += ["group_size:4,zstd:-3", "group_size:3,snappy", "group_size:2,brotli:11,window_log:20"]


def damages(header: ChunkHeader, payload: bytes, seed: int):
    """(name, header, payload) triples: header fields, then flipped bits."""
    yield "num_records+1", ChunkHeader(**{**header.__dict__, "num_records": header.num_records + 1}), payload
    if header.num_records > 1:
        yield (
            "num_records-1",
            ChunkHeader(**{**header.__dict__, "num_records": header.num_records - 1}),
            payload,
        )
    for delta in (-1, 1):
        changed = ChunkHeader(**{**header.__dict__, "decoded_data_size": header.decoded_data_size + delta})
        yield f"decoded_data_size{delta:+d}", changed, payload
    layout = simple_chunk_layout(payload)
    regions = {
        "compression": range(0, 1),
        "sizes": range(layout.sizes_begin, layout.sizes_end),
        "values": range(layout.values_begin, layout.values_end),
    }
    if layout.compression == 0:
        # Uncompressed: aim at the first record's parts as well.
        values = layout.values_begin
        regions["length prefix"] = range(values, values + 8)
        regions["safetensors header"] = range(
            values + 8, values + 8 + min(200, layout.values_end - values - 8)
        )
    rng = random.Random(seed)
    for region, positions in regions.items():
        if LONG:
            picks = [(p, bit) for p in positions for bit in (1, 6)]
        else:
            picks = [(rng.choice(positions), rng.randrange(8)) for _ in range(min(6, len(positions)))]
        for position, bit in picks:
            damaged = bytearray(payload)
            damaged[position] ^= 1 << bit
            yield f"{region} byte {position} bit {bit}", header, bytes(damaged)


#: What signal_dataset raises for a damaged record: array_record's RuntimeError
#: (its one exception type) for a chunk it refuses, its codecs' ValidationError
#: for a record it cannot decode, CorruptDatasetError for a shard that does not
#: match its manifest; KeyError for a record whose damaged descriptor renamed
#: the field. Anything else escaping it fails the test.
REFERENCE_REFUSALS = (RuntimeError, sds.errors.ValidationError, sds.CorruptDatasetError, KeyError)


def reference_reads(root):
    """Each record's samples from signal_dataset, or the refusal it raised."""
    try:
        dataset = sds.open(os.fspath(root))
    except REFERENCE_REFUSALS as exc:
        return [(None, exc)] * RECORDS
    results = []
    for ordinal in range(RECORDS):
        try:
            results.append((dataset[ordinal]["samples"].data.tobytes(), None))
        except REFERENCE_REFUSALS as exc:
            results.append((None, exc))
    return results


def loader_reads(root):
    """Each record's samples from BatchReader, read alone, or the typed error it raised."""
    try:
        reader = sds_loader.BatchReader(root, fields=["samples"], threads=1)
    except (sds_loader.CorruptShardError, ValueError) as exc:
        # Opening probes record 0; damage there refuses the whole dataset.
        return [(None, exc)] * RECORDS
    results = []
    for ordinal in range(RECORDS):
        try:
            results.append((reader.read([ordinal])["samples"][0].tobytes(), None))
        except (sds_loader.CorruptShardError, ValueError) as exc:
            # ValueError: the damage renamed or reshaped a field, and the
            # record no longer has the one asked for (MixedShapesError among them).
            results.append((None, exc))
    return results


@pytest.mark.parametrize("options", LAYOUTS)
def test_damage_never_yields_bytes_signal_dataset_would_not(tmp_path, options):
    pristine_root = tmp_path / "pristine"
    write_dataset(pristine_root, RECORDS, partial(capture, samples=24), writer_options=options)
    reference = sds.open(os.fspath(pristine_root))
    pristine = [reference[i]["samples"].data.tobytes() for i in range(RECORDS)]
    root = tmp_path / "damaged"
    shutil.copytree(pristine_root, root)
    (shard,) = data_shards(root)
    original = ShardImage(shard)
    chunks = record_chunks(shard)
    victim = chunks[min(VICTIM_CHUNK, len(chunks) - 1)]
    header, payload = original.chunk(victim)

    counts = collections.Counter()
    wrong, stricter, unexplained = [], [], []
    for name, damaged_header, damaged_payload in damages(header, payload, seed=zlib.crc32(options.encode())):
        image = ShardImage(shard)
        image.data[:] = original.data
        image.replace(victim, damaged_header, damaged_payload)
        image.save()
        for ordinal, ((expected, refused), (got, error)) in enumerate(
            zip(reference_reads(root), loader_reads(root), strict=True)
        ):
            counts["cases"] += 1
            if got is None:
                counts["both raise" if refused else "sds_loader stricter"] += 1
                if not refused:
                    stricter.append(f"{name}, record {ordinal}: {error}")
                    if stricter_class(error) is None:
                        unexplained.append(f"{name}, record {ordinal}: {type(error).__name__}: {error}")
            elif refused is not None and got != pristine[ordinal]:
                wrong.append((name, ordinal, f"signal_dataset raised {refused!r}"))
            elif refused is None and got != expected:
                wrong.append((name, ordinal, "bytes differ from signal_dataset's"))
            else:
                counts["identical" if refused is None else "pristine where signal_dataset raises"] += 1
    counts["wrong bytes"] = len(wrong)
    print(f"\n{options}: " + ", ".join(f"{key} {value}" for key, value in sorted(counts.items())))
    for case in stricter[:3]:
        print(f"  only sds_loader refuses: {case}"[:300])
    assert not wrong, wrong[:10]
    assert not unexplained, "sds_loader refuses records signal_dataset reads:\n" + "\n".join(unexplained[:10])
    assert counts["cases"] > 0 and counts["both raise"] > 0, counts


def test_only_the_named_refusals_pass_as_stricter():
    """The classes the damage tests allow are the ones docs/errors.md names, and nothing else matches them."""
    with open(os.path.join(REPO, "docs", "errors.md"), encoding="utf-8") as handle:
        documented = handle.read()
    for name in STRICTER:
        assert f"*{name}*" in documented, f"docs/errors.md does not document {name!r}"
    assert stricter_class(sds_loader.CorruptShardError("shard x: record 1: chunk data hash mismatch")) is None
    assert stricter_class(ValueError("record sizes claim 5 bytes for 2 records")) is None
    sized = sds_loader.CorruptShardError(
        "shard x: record 1 (record 1 of the shard): record sizes claim 9 bytes for 3 records"
    )
    assert stricter_class(sized) == "a chunk's record-size table is checked whole"


def test_a_metadata_integer_past_float64_reads_as_signal_dataset_reads_it(tmp_path):
    """Python's json keeps 10**400 exact; the record is no refusal, and only
    a target that cannot hold the value is an error."""

    def record(ordinal: int) -> sds.Record:
        return sds.Record(
            id=f"r{ordinal}",
            fields={"samples": field(np.zeros(2, np.float32))},
            metadata={"big": 10**400 if ordinal == 1 else 1},
        )

    write_dataset(tmp_path / "ds", 2, record)
    assert sds.open(os.fspath(tmp_path / "ds"))[1].metadata["big"] == 10**400
    reader = sds_loader.BatchReader(os.fspath(tmp_path / "ds"), fields=["samples"])
    assert_matches_reference(tmp_path / "ds", reader.read([1, 0]), [1, 0], ["samples"])
    with pytest.raises(sds_loader.TargetError) as refused:
        sds_loader.BatchReader(os.fspath(tmp_path / "ds"), fields=["samples"], targets=["big"]).read([0, 1])
    assert "record 1" in str(refused.value) and "1" + "0" * 400 in str(refused.value)
