"""`sds-loader bench --windows`: the long-capture rows, on a tiny cached dataset."""

import os
import re

import signal_dataset as sds

from sds_loader.cli import main
from sds_loader.cli.bench import windows

ROWS = [
    ("uncompressed", "signal_dataset: whole capture, then slice"),
    ("uncompressed", "BatchReader window, verify_checksums=False"),
    ("uncompressed", "BatchReader window, checksums on, chunks verified earlier in this process"),
    ("zstd", "signal_dataset: whole capture, then slice"),
    ("zstd", "BatchReader, whole capture"),
    ("zstd", "BatchReader window (decompression stops at its end)"),
]


def test_bench_windows_writes_long_captures_and_times_every_row(capsys, tmp_path):
    cache = os.fspath(tmp_path / "cache")
    assert main(["bench", "--windows", "--windows-captures", "2", "--cache-dir", cache]) == 0
    out = capsys.readouterr().out
    assert f"cached under {cache}" in out
    rates: dict[tuple[str, str], tuple[float, float, str]] = {}
    for variant, label in ROWS:
        line = next((row for row in out.splitlines() if row.startswith(variant) and label in row), None)
        assert line is not None, f"no {variant} row {label!r} in:\n{out}"
        rate, ratio, against = re.search(r"([\d,]+) rec/s\s+([\d.]+)x (.+)$", line).groups()
        rates[variant, label] = (float(rate.replace(",", "")), float(ratio), against.strip())
    # Each ratio is the row's rate over the row it names (as printed, rounded).
    for (variant, label), (rate, ratio, against) in rates.items():
        assert rate > 0
        base_label = ROWS[0][1] if against == "signal_dataset" else "BatchReader, whole capture"
        base = rates[variant, base_label][0]
        # Rates print to the unit and ratios to a tenth: allow for both roundings.
        slack = 0.05 + (rate / base) * (0.5 / rate + 0.5 / base)
        assert abs(ratio - rate / base) <= slack, (variant, label, rate, ratio, base)
    # The checksummed window row hashes nothing in its timed epochs (its
    # warm-up verified every chunk), and its label must not claim otherwise.
    assert "second epoch" not in out
    assert windows.VERIFIED_EARLIER in out
    # The captures are the real long ones, written where --cache-dir said.
    roots = windows.ensure(2, cache)
    for root in roots.values():
        assert root.startswith(cache)
        dataset = sds.open(root)
        assert len(dataset) == 2
        assert dataset[1]["samples"].data.shape == (windows.SAMPLES,)
