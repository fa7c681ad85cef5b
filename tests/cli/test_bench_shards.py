"""`sds-loader bench --shards`: its dataset reads as signal_dataset reads it, and its rows are timed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import signal_dataset as sds

from sds_loader import BatchReader
from sds_loader.cli.bench import many_shards


def test_the_many_shard_dataset_reads_as_signal_dataset_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "many"
    assert many_shards.main([str(root), "--shards", "40", "--repeat", "1", "--no-workers"]) == 0
    out = capsys.readouterr().out
    assert "wrote 40 shards" in out
    for row in ("signal_dataset open", "reader open ", "reader open_and_first_batch", "reader shards"):
        assert row in out, out
    dataset = sds.open(str(root))
    assert len(dataset) == 40 * many_shards.RECORDS_PER_SHARD
    # Shards past the first few are links to them, under names of their own.
    assert len({i.filename for i in dataset.read_instructions(0, len(dataset))}) == 40
    order = np.random.default_rng(3).permutation(len(dataset))[:100]
    batch = BatchReader(str(root), threads=1).read(order)
    assert [row.tobytes() for row in batch["samples"]] == [
        dataset[int(i)]["samples"].data.tobytes() for i in order
    ]
    # A second run finds the dataset and writes nothing.
    assert many_shards.main([str(root), "--shards", "40", "--repeat", "1", "--no-workers"]) == 0
    assert "wrote" not in capsys.readouterr().out
