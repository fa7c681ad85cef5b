"""`sds-loader bench --loader`: every DataLoader row, on a small dataset, once each."""

from __future__ import annotations

import torch_required  # noqa: F401 - skips this module without torch

import re

import pytest
import sds_factory

from sds_loader import cli
from sds_loader.cli.bench import loader


@pytest.fixture()
def small_root(tmp_path) -> str:
    root = tmp_path / "captures"
    sds_factory.write_dataset(root, 48, records_per_shard=24)
    return str(root)


def test_loader_bench_prints_and_writes_every_row(capsys, small_root, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(loader, "REPEATS", 1)
    monkeypatch.setattr(loader, "EPOCHS", 1)
    out_dir = tmp_path / "results"
    code = cli.main(
        ["bench", small_root, "--loader", "--batch-size", "8", "--out", str(out_dir), "--no-progress"]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert (out_dir / "loader.md").read_text() in out
    assert f"rows: {out_dir / 'loader.md'}" in out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line][1:]
    labels = [row.split(" | ")[1] for row in rows]
    assert labels == [
        "DataLoader, 0 workers",
        "DataLoader, 2 workers",
        "DataLoader, 2 workers, a fresh block per batch",
        "2 workers, as % of 0 workers",
        "2 workers, a fresh block per batch, as % of 0 workers",
        "delivery per batch: 0 workers",
        "delivery per batch: 2 workers",
        "delivery per batch: 2 workers, a fresh block per batch",
        "cold epoch, shuffle=True",
        "cold epoch, ShardAwareSampler(readahead=0)",
        "cold epoch, ShardAwareSampler(readahead=16)",
        "warm epoch, ShardAwareSampler",
        "ShardAwareSampler(readahead=0) / shuffle=True, cold",
        "ShardAwareSampler(readahead=16) / shuffle=True, cold",
        "bound: warm ShardAwareSampler / cold shuffle=True",
    ]
    defaults = [row.split(" | ")[1] for row in rows if "the sampler's default" in row]
    assert defaults == [
        "cold epoch, ShardAwareSampler(readahead=16)",
        "ShardAwareSampler(readahead=16) / shuffle=True, cold",
    ]
    for row in rows:
        median = row.split(" | ")[2]
        assert re.fullmatch(r"-?[\d,.]+ (rec/s|%|ms CPU|x)", median), row
    # A second run into the same folder refuses to replace the first one's rows.
    again = cli.main(["bench", small_root, "--loader", "--out", str(out_dir), "--no-progress"])
    assert again != 0
    assert "loader.md holds an earlier run's rows" in capsys.readouterr().err


def test_rows_take_the_median_of_their_repeats() -> None:
    row = loader.LoaderRow("zstd", "k", "label", values=[3.0, 1.0, 2.0], unit="x")
    assert row.median == 2.0
    assert "| zstd | label | 2.00 x | 3.00, 1.00, 2.00 |" in loader.table([row])
    assert loader.LoaderRow("zstd", "k", "label").median is None
