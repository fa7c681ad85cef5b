"""zstd as signal_dataset writes it: every writer option reads natively and
byte for byte, and a damaged frame is refused as the reference refuses it.

The reader links the zstd release vendored in third_party/zstd rather than the
system's library: Debian's 1.5.4 decodes some damaged frames without an error
that 1.5.7 (and the zstd inside array_record, through which signal_dataset
reads) reports as corruption.
"""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
import sys
from functools import partial

import pytest
import signal_dataset as sds
from sds_factory import assert_matches_reference, capture, data_shards, record_chunks, write_dataset
from shard_surgery import ShardImage, simple_chunk_layout

import sds_loader

FIELDS = ["samples"]

WRITER_OPTIONS = [
    "group_size:1,zstd:-7",
    "group_size:1,zstd:1",
    "group_size:3,zstd:22",
    "group_size:1,zstd:3,window_log:28",
    "window_log:31",
    "group_size:1,zstd:19,window_log:31",
    "group_size:5,zstd:3,window_log:30",
    "group_size:2,brotli:11,window_log:24",
    "group_size:1,brotli:0",
    "group_size:4,snappy",
    "group_size:3,uncompressed",
]


def verify_exit_code(root) -> int:
    command = [sys.executable, "-m", "sds_loader", "verify", os.fspath(root)]
    return subprocess.run(command, capture_output=True, text=True).returncode


@pytest.mark.parametrize("options", WRITER_OPTIONS)
def test_every_writer_option_reads_natively(tmp_path, options):
    root = tmp_path / "dataset"
    write_dataset(root, 10, partial(capture, samples=64), writer_options=options)
    reader = sds_loader.BatchReader(root, fields=FIELDS, targets=["label"])
    order = [9, 0, 4, 4, 7, 2]
    assert_matches_reference(root, reader.read(order), order, FIELDS, ["label"])
    assert (reader.stats.native_records, reader.stats.fallback_records) == (len(order), 0)
    assert verify_exit_code(root) == 0


@pytest.mark.parametrize("options", ["window_log:31", "group_size:3,zstd:5,window_log:29"])
def test_large_window_with_records_spanning_blocks(tmp_path, options):
    """Records larger than a 64 KiB block, whose frames declare a window of up
    to 2 GiB: decoded in one shot, into a buffer of their own size."""
    root = tmp_path / "dataset"
    write_dataset(root, 4, partial(capture, channels=4, samples=5000), writer_options=options)
    reader = sds_loader.BatchReader(root, fields=FIELDS, threads=2)
    assert_matches_reference(root, reader.read([3, 1, 0, 2]), [3, 1, 0, 2], FIELDS)
    assert reader.stats.native_records == 4


# -- a frame Debian's zstd 1.5.4 decodes, and 1.5.7 refuses ------------------


# Offset into the zstd frame of record 1 (signal_dataset's default writer, a
# capture of noise) and the bit flipped there: found by flipping every bit of
# that frame and keeping one that Debian's 1.5.4 decodes to the full length
# and 1.5.7 refuses.
DAMAGE_OFFSET, DAMAGE_BIT = 76, 4


def system_zstd_decodes(frame: bytes, size: int) -> bool | None:
    """Whether Debian's libzstd 1.5.4 decodes `frame` to `size` bytes without an
    error; None when that library is not the one installed."""
    try:
        library = ctypes.CDLL("libzstd.so.1")
    except OSError:
        return None
    library.ZSTD_versionNumber.restype = ctypes.c_uint
    if library.ZSTD_versionNumber() != 10504:
        return None
    library.ZSTD_decompress.restype = ctypes.c_size_t
    library.ZSTD_decompress.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    library.ZSTD_isError.argtypes = [ctypes.c_size_t]
    output = ctypes.create_string_buffer(size)
    written = library.ZSTD_decompress(output, size, frame, len(frame))
    return not library.ZSTD_isError(written) and written == size


@pytest.mark.parametrize("verify", [True, False], ids=["verified", "unverified"])
def test_frame_zstd_154_decodes_is_corrupt(tmp_path, verify):
    root = tmp_path / "dataset"
    write_dataset(root, 4)
    (shard,) = data_shards(root)
    victim = record_chunks(shard)[1]
    image = ShardImage(shard)
    header, payload = image.chunk(victim)
    layout = simple_chunk_layout(payload)
    assert chr(layout.compression) == "z"
    damaged = bytearray(payload)
    damaged[layout.values_begin + DAMAGE_OFFSET] ^= 1 << DAMAGE_BIT
    image.replace(victim, header, bytes(damaged))
    image.save()

    frame = bytes(damaged[layout.values_begin :])
    old_decodes = system_zstd_decodes(frame, header.decoded_data_size)
    assert old_decodes in (True, None), "the damage no longer slips past zstd 1.5.4; pick another bit"

    reference = sds.open(os.fspath(root))
    # array_record's refusal, raised as the RuntimeError that is its one exception type.
    with pytest.raises(RuntimeError, match="ZSTD_decompressStream"):
        reference[1]["samples"]
    reader = sds_loader.BatchReader(root, fields=FIELDS, verify_checksums=verify)
    with pytest.raises(sds_loader.CorruptShardError) as raised:
        reader.read([0, 1, 2])
    message = str(raised.value)
    assert os.path.basename(shard) in message and re.search(r"\brecord 1\b", message), message
    assert verify_exit_code(root) != 0
    assert_matches_reference(root, reader.read([0, 2, 3]), [0, 2, 3], FIELDS)
