"""`sds-loader bench --windows`: the long-capture rows, on a tiny cached dataset."""

import os
import re

import signal_dataset as sds

from sds_loader.cli import main
from sds_loader.cli.bench import windows

ROWS = [
    ("uncompressed", "signal_dataset: whole capture, then slice"),
    ("uncompressed", "BatchReader window, verify_checksums=False"),
    ("uncompressed", "BatchReader window, checksums on, second epoch"),
    ("zstd", "signal_dataset: whole capture, then slice"),
    ("zstd", "BatchReader, whole capture"),
    ("zstd", "BatchReader window (decompression stops at its end)"),
]


def test_bench_windows_writes_long_captures_and_times_every_row(capsys, tmp_path):
    cache = os.fspath(tmp_path / "cache")
    assert main(["bench", "--windows", "--windows-captures", "2", "--cache-dir", cache]) == 0
    out = capsys.readouterr().out
    assert f"cached under {cache}" in out
    for variant, label in ROWS:
        line = next((row for row in out.splitlines() if row.startswith(variant) and label in row), None)
        assert line is not None, f"no {variant} row {label!r} in:\n{out}"
        rate, ratio = re.search(r"([\d,]+) rec/s\s+([\d.]+)x", line).groups()
        assert float(rate.replace(",", "")) > 0 and float(ratio) > 0
    # The captures are the real long ones, written where --cache-dir said.
    roots = windows.ensure(2, cache)
    for root in roots.values():
        assert root.startswith(cache)
        dataset = sds.open(root)
        assert len(dataset) == 2
        assert dataset[1]["samples"].data.shape == (windows.SAMPLES,)
