"""A shard truncated while a reader has it mapped raises; it never kills the process.

Warm batches are copied out of a mapping of each shard. Touching a mapped
page past the end of a file that shrank after it was mapped raises SIGBUS,
which by default ends the process. The reader guards those copies: the read
raises CorruptShardError naming the shard, and the reader keeps serving the
records that are still there.

Each scenario runs in a child interpreter, so that a regression shows as a
failed test with the child's output rather than as a crashed test run. The
child reads the truncated shard with the reader's SIGBUS handler alone, over
faulthandler's (enabled first, as pytest and many training scripts do), and
after faulthandler has put its own over the reader's. The reader never
installs its handler over one that may chain back to it, so in that last
case its batches read with pread, which meets the short file as a short
read: CorruptShardError all the same, and no faulthandler dump.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from functools import partial

import pytest
from native_required import _native  # noqa: F401,E402 - a build without it fails the run (conftest.py)
from sds_factory import capture, data_shards, record_chunks, write_dataset

RECORDS = 16
PAGE = 4096

CHILD = textwrap.dedent(
    """
    import faulthandler, os, sys
    import numpy as np
    import signal_dataset as sds
    import sds_loader

    root, shard, cut, threads, replace_handler = sys.argv[1:6]
    threads, cut = int(threads), int(cut)
    # Records in chunks of their own, apart from one another, so that each is
    # a run of its own; the last one lies past the cut.
    batch = [0, 2, 4, 6, 15]
    if replace_handler == "faulthandler-first":
        faulthandler.enable()
    reader = sds_loader.BatchReader(root, fields=["samples"], threads=threads)
    before = reader.read(batch)["samples"].copy()
    reference = sds.open(root)
    for row, index in enumerate(batch):
        assert before[row].tobytes() == reference[index]["samples"].data.tobytes(), index
    if replace_handler == "faulthandler-after":
        faulthandler.disable()
        faulthandler.enable()
    os.truncate(shard, cut)
    try:
        reader.read(batch)
    except sds_loader.CorruptShardError as error:
        print("raised:", error)
    else:
        print("returned a batch from a truncated shard")
        sys.exit(1)
    # What lies before the cut is still served, unchanged.
    again = reader.read(batch[:4])["samples"]
    assert again.tobytes() == before[:4].tobytes()
    print("still reads")
    """
)


@pytest.mark.parametrize("options", [None, "group_size:1,uncompressed"], ids=["zstd", "uncompressed"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("handler", ["own", "faulthandler-first", "faulthandler-after"])
def test_a_shard_truncated_under_a_reader_raises(tmp_path, options, threads, handler):
    root = tmp_path / "data"
    write_dataset(root, RECORDS, partial(capture, samples=4096), writer_options=options)
    [shard] = data_shards(root)
    chunks = record_chunks(shard)
    assert len(chunks) == RECORDS, "each record in a chunk of its own"
    # Cut on a page boundary past record 6 and well before record 15, so that
    # record 15's pages are gone from the mapping, not just shortened.
    cut = (chunks[15].begin - PAGE) // PAGE * PAGE
    assert chunks[6].end < cut
    child = subprocess.run(
        [sys.executable, "-c", CHILD, os.fspath(root), shard, str(cut), str(threads), handler],
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = child.stdout + child.stderr
    assert child.returncode == 0, output
    assert "raised:" in output and shard in output, output
    assert "Fatal Python error" not in output, output
    if handler == "faulthandler-after":
        # Read with pread, which reports a short read.
        assert "shard ended early" in output, output
    else:
        # Copied out of the mapping, not read with pread.
        assert "shrank while it was being read" in output, output
    assert "still reads" in output, output
