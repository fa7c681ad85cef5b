"""`sds-loader bench --mixture`: every row, on a small built-in dataset, once."""

from __future__ import annotations

import torch_required  # noqa: F401 - skips this module without torch

import re

import pytest

from sds_loader import cli
from sds_loader.cli.bench import mixture_cost


def test_mixture_bench_prints_and_writes_every_row(
    capsys: pytest.CaptureFixture[str], tmp_path, monkeypatch
) -> None:
    monkeypatch.setattr(mixture_cost, "REPEATS", 1)
    out_dir = tmp_path / "results"
    argv = [
        "bench",
        "--mixture",
        "--builtin-records",
        "64",
        "--batch-size",
        "16",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--out",
        str(out_dir),
        "--no-progress",
    ]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert (out_dir / "mixture.md").read_text() in out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line][1:]
    labels = [row.split(" | ")[0].removeprefix("| ") for row in rows]
    # 0.7 and 0.3 of an epoch of 128 records: 90 (of 64 zstd records: some twice) and 38.
    assert labels == [
        "zstd alone, the mixture's 90 records of it",
        "uncompressed alone, the mixture's 38 records of it",
        "mixture 70/30, 128 records",
        "the same, each batch's rows shuffled",
        "time-weighted mean of the members alone",
        "mixture, as % of the time-weighted mean",
        "shuffled rows, as % of the time-weighted mean",
    ]
    values = {}
    for row, label in zip(rows, labels, strict=True):
        shown = re.fullmatch(r"([\d,.]+) (rec/s|%)", row.split(" | ")[1])
        assert shown is not None, row
        values[label] = float(shown.group(1).replace(",", ""))
    zstd, plain, mixed, shuffled, expected, share, shuffled_share = values.values()
    # The expectation is the time-weighted (harmonic) mean of the members' rates,
    # with the shares the epoch drew: it lies between the two rates.
    assert expected == pytest.approx(1 / (90 / 128 / zstd + 38 / 128 / plain), rel=0.01)
    assert share == pytest.approx(100 * mixed / expected, rel=0.01)
    assert shuffled_share == pytest.approx(100 * shuffled / expected, rel=0.01)
    assert "shares drawn: zstd 70.3%, uncompressed 29.7%" in rows[-2]
    again = cli.main(argv)
    assert again != 0
    assert "mixture.md holds an earlier run's rows" in capsys.readouterr().err


def test_mixture_bench_refuses_a_path(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    assert cli.main(["bench", str(tmp_path), "--mixture", "--no-progress", "--out", str(tmp_path / "o")]) != 0
    assert "--mixture mixes the built-in datasets; leave out PATH" in capsys.readouterr().err
