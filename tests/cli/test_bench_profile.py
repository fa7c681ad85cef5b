"""`sds-loader bench --profile` and `--plot FILE`: each row's time by stage, as shares and bars."""

from __future__ import annotations

import json
import re

import pytest
import sds_factory
from native_required import _native  # noqa: F401

from sds_loader import cli
from sds_loader.stage_times import STAGES


@pytest.fixture(scope="module")
def zstd_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("profile") / "ds"
    sds_factory.write_dataset(root, 24, records_per_shard=8)
    return str(root)


def test_profile_prints_and_plots_each_rows_stage_shares(capsys, zstd_root, tmp_path):
    import torch_required  # noqa: F401 - the DataLoader rows need torch

    plot = tmp_path / "stages.png"
    out_dir = tmp_path / "results"
    code = cli.main(
        ["bench", zstd_root, "--batches", "2", "--batch-size", "8", "--threads", "2", "--out", str(out_dir)]
        + ["--no-progress", "--profile", "--plot", str(plot)]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    document = json.loads((out_dir / "bench.json").read_text())
    rows = {row["key"]: row for row in document["rows"]}
    # Rows read by sds-loader carry their stage times; signal_dataset's do not.
    assert rows["sds_getitems"]["stage_seconds"] is None
    for key in ("batchreader_1", "batchreader_1_unverified", "torch_w0", "torch_w2"):
        seconds = rows[key]["stage_seconds"]
        assert set(seconds) == set(STAGES) and seconds["decompress"] > 0, (key, seconds)
    assert rows["batchreader_1_unverified"]["stage_seconds"]["hash"] == 0.0
    # The median pass's own stage times: at one thread, within that pass's wall time.
    one = rows["batchreader_1"]
    assert 0.5 * one["seconds"] <= sum(one["stage_seconds"].values()) <= 1.05 * one["seconds"], one
    # Stage times off: nothing timed, Python's part neither, so no profile line for it.
    untimed = rows["batchreader_1_untimed"]["stage_seconds"]
    assert untimed == dict.fromkeys(STAGES, 0.0), untimed
    profile = out[out.index("where each row's time went") :].split("\n\n")[0]
    assert re.search(r"method\s+µs a record\s+" + r"\s+".join(STAGES), profile), profile
    body = profile.splitlines()[3:]
    labels = {re.split(r"\s{2,}", line.strip())[1]: line for line in body}
    assert "BatchReader.read, 1 thread" in labels, profile
    assert "BatchReader.read, 1 thread, stage times off" not in labels
    assert "SDS Dataset.__getitems__ + default_collate" not in labels
    shares = [int(cell[:-1]) for cell in re.findall(r"\d+%", labels["BatchReader.read, 1 thread"])]
    assert 97 <= sum(shares) <= 103, labels["BatchReader.read, 1 thread"]  # rounded shares
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_profile_is_refused(capsys, zstd_root, tmp_path):
    code = cli.main(["bench", zstd_root, "--plot", str(tmp_path / "x.png"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "--profile" in err
