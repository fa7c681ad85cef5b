"""Write seed corpora for the fuzz targets from real signal_dataset shards.

    python fuzz/make_seeds.py OUT_DIR

writes small datasets with every compression signal_dataset can use into
OUT_DIR/datasets, then cuts seeds for each target into OUT_DIR/<target>/:

* fuzz_chunk_walk, fuzz_shard_index: whole shards, behind the option byte
  each target reads first;
* fuzz_simple_chunk: each simple chunk's data, behind the 16 header bytes the
  target reads first (num_records, decoded_data_size);
* fuzz_safetensors: whole SafeTensors records, as signal_dataset wrote them;
* fuzz_augment: augmentation chains (no shard): the options byte, record
  length, window, each step's kind and parameters, then sample bytes.

Seeds are generated, never committed; only small crasher regressions live in
fuzz/regressions/<target>/.
"""

from __future__ import annotations

import hashlib
import os
import struct
import sys
from functools import partial

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "support"))

import numpy as np  # noqa: E402
import signal_dataset as sds  # noqa: E402
from array_record.python.array_record_module import ArrayRecordReader  # noqa: E402
from sds_factory import (  # noqa: E402
    CHUNK_HEADER_SIZE,
    capture,
    data_shards,
    field,
    logical_to_physical,
    read_chunks,
    write_dataset,
)

#: One dataset per way signal_dataset can store a shard.
WRITER_OPTIONS = {
    "zstd": None,
    "uncompressed": "group_size:1,uncompressed",
    "snappy": "group_size:1,snappy",
    "brotli": "group_size:1,brotli:6",
    "group4-zstd": "group_size:4,zstd:3",
    "group4-snappy": "group_size:4,snappy",
    "transposed": "group_size:1,transpose:true",
}


def mixed(ordinal: int) -> sds.Record:
    """A record with several dtypes and ranks, so seeds cover more than one shape."""
    rng = np.random.default_rng(ordinal)
    return sds.Record(
        id=f"mixed-{ordinal}",
        fields={
            "iq": field(rng.standard_normal((2, 8)).astype(np.complex64)),
            "flags": field(np.array([True, False, ordinal % 2 == 0])),
            "counts": field(np.arange(ordinal % 3, dtype=np.int16)),
        },
        metadata={"label": ordinal, "snr_db": 1.5 * ordinal, "note": "x" * ordinal},
    )


def put(directory: str, data: bytes) -> None:
    os.makedirs(directory, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(directory, name), "wb") as file:
        file.write(data)


def chunk_data(file_bytes: bytes, chunk) -> bytes:
    return bytes(
        file_bytes[logical_to_physical(chunk.begin, CHUNK_HEADER_SIZE + k)] for k in range(chunk.data_size)
    )


#: (options, record length, window start, window length, [(kind, params)]) of
#: each augmentation seed; options' low 3 bits are the steps less one, bit 3
#: complex128, bits 4-5 the channels less one, bit 6 two threads.
AUGMENT_SEEDS = [
    (
        0x03,
        1024,
        0,
        1024,
        [(1, [1, 0.3, 0, 0]), (2, [1, 0.01, 0, 0]), (3, [1, 17, 0, 0]), (5, [1, 10, float("nan"), 0])],
    ),
    (0x5B, 900, -50, 300, [(3, [1, 400, 1, 0]), (9, [1, 1.3, 0, 0]), (7, [1, 0, 0, 0]), (5, [1, 3, 20, 0])]),
    (0x41, 500, 10, 200, [(9, [1, 0.37, 0, 0]), (6, [1, 0, 0, 0])]),
    (0x2A, 700, 650, 100, [(8, [1, 1.5, 0.2, 0]), (4, [1, 2.0, 0, 0]), (3, [1, -90, 0, 0])]),
]


def augment_seeds(out: str) -> None:
    for options, length, start, window, steps in AUGMENT_SEEDS:
        data = bytes([options]) + struct.pack("<HhH", length, start, window)
        for kind, params in steps:
            data += bytes([kind]) + struct.pack("<4d", *params)
        put(os.path.join(out, "fuzz_augment"), data + bytes(range(3, 250, 7)))


def main(out: str) -> None:
    augment_seeds(out)
    datasets = os.path.join(out, "datasets")
    for name, options in WRITER_OPTIONS.items():
        root = os.path.join(datasets, name)
        if not os.path.exists(os.path.join(root, "root.json")):
            make = mixed if name.startswith("group4") else partial(capture, samples=16)
            write_dataset(root, 6, make, writer_options=options)
        for shard in data_shards(root):
            with open(shard, "rb") as file:
                data = file.read()
            for option in (0, 1, 3):
                put(os.path.join(out, "fuzz_chunk_walk"), bytes([option]) + data)
            for option in (0, 1):
                put(os.path.join(out, "fuzz_shard_index"), bytes([option]) + data)
            for chunk in read_chunks(shard):
                if chunk.chunk_type != "r":
                    continue
                header = struct.pack("<QQ", chunk.num_records, chunk.decoded_data_size)
                put(os.path.join(out, "fuzz_simple_chunk"), header + chunk_data(data, chunk))
            if name != "transposed":
                reader = ArrayRecordReader(shard, "readahead_buffer_size:0")
                try:
                    for record in reader.read_all():
                        put(os.path.join(out, "fuzz_safetensors"), bytes(record))
                finally:
                    reader.close()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_seeds.py OUT_DIR")
    main(sys.argv[1])
