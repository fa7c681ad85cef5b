"""A large batch is planned in pieces, one per thread, cut at shard boundaries.

The pieces' plans laid end to end must be the plan of the whole batch: the
same bytes in every row (repeats of a record folded within their piece, runs
of neighbouring records kept whole), and, for a batch that names a record
its shard does not hold, the error the whole batch planned at once would
raise first.
"""

from __future__ import annotations

import numpy as np
import pytest
from native_batches import native_read, open_native
from native_required import _native
from sds_factory import assert_matches_reference, write_dataset

import sds_loader
from sds_loader.errors import CorruptShardError

# Records per shard, and shards: a batch of 256 rows spans all of them.
PER_SHARD = 24
SHARDS = 12


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> str:
    root = str(tmp_path_factory.mktemp("pieces") / "captures")
    write_dataset(
        root,
        PER_SHARD * SHARDS,
        records_per_shard=PER_SHARD,
        writer_options=["zstd:1", None, "uncompressed"] * 4,
    )
    return root


def test_a_batch_planned_in_pieces_reads_what_signal_dataset_reads(root):
    rng = np.random.default_rng(7)
    # Shuffled, with repeats, and with stretches of neighbours (runs of several chunks).
    shuffled = rng.integers(0, PER_SHARD * SHARDS, size=200)
    stretch = np.arange(100, 156)
    indices = np.concatenate([shuffled, stretch, shuffled[:20]])
    rng.shuffle(indices)
    one = sds_loader.BatchReader(root, fields=["samples"], targets=["label"], threads=1).read(indices)
    for threads in (2, 3, 8):
        batch = sds_loader.BatchReader(root, fields=["samples"], targets=["label"], threads=threads).read(
            indices
        )
        assert_matches_reference(root, batch, indices, ["samples"], ["label"])
        for name, rows in one.items():
            np.testing.assert_array_equal(batch[name], rows)


def test_a_record_past_its_shards_end_raises_the_error_of_the_first_piece(root):
    native, table = open_native(root)
    ordinals = np.random.default_rng(3).permutation(PER_SHARD * SHARDS)[:256]
    files, shard_records = table.locate(ordinals)
    # One bad record in the first shard's piece, one in the last shard's: the
    # error names the first, as the whole batch planned on one thread would.
    first = int(np.flatnonzero(files == files.min())[0])
    last = int(np.flatnonzero(files == files.max())[0])
    layout = _native.BatchLayout()
    layout.add_target("label", "i")

    def read(bad_rows: list[int], threads: int) -> str:
        records = shard_records.copy()
        for row in bad_rows:
            records[row] = PER_SHARD + 5
        label = np.zeros(len(ordinals), dtype=np.int64)
        with pytest.raises(CorruptShardError) as raised:
            native.read(files, records, ordinals, layout, {"label": label}, threads)
        return str(raised.value)

    for threads in (1, 2, 4):
        both = read([last, first], threads)
        assert f"record {ordinals[first]} is record {PER_SHARD + 5}" in both
        assert f"of a shard that holds {PER_SHARD}" in both
        alone = read([last], threads)
        assert f"record {ordinals[last]} is record {PER_SHARD + 5}" in alone
    # The native reader still reads the batch whole afterwards.
    batch = native_read(native, table, ordinals.tolist(), threads=2)
    assert_matches_reference(root, batch, ordinals.tolist(), ["samples"], ["label"])
