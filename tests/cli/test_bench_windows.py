"""`sds-loader bench --windows`: the long-capture rows, on a tiny cached dataset."""

import importlib.util
import os
import re

import numpy as np
import pytest
import signal_dataset as sds

from sds_loader.cli import main
from sds_loader.cli.bench import shapes, windows

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
    # The batch-shape rows, counted from what the DataLoader delivered.
    counted = {}
    for line in out.splitlines():
        found = re.search(r"^(.+?)\s+(\d+) shapes/epoch\s+(\d+) both epochs\s+([\d.]+)% padded$", line)
        if found:
            counted[found.group(1).strip()] = (
                int(found.group(2)),
                int(found.group(3)),
                float(found.group(4)),
            )
    if importlib.util.find_spec("torch") is None:
        # The shape rows count what a DataLoader delivered, and say so where torch is missing.
        assert not counted and "batch shapes: skipped" in out, out
        return
    assert len(counted) == 6, out
    lengths = np.asarray([shapes.length(o) for o in range(shapes.RECORDS)])
    rows = list(counted.values())
    longest_everywhere, random_longest, bucketed, bounded, masked, repeated = rows
    assert longest_everywhere[:2] == (1, 1)  # 512 records in batches of 32: no short batch
    assert longest_everywhere[2] == pytest.approx(
        100 * (1 - lengths.sum() / (lengths.size * shapes.LONGEST)), abs=0.06
    )
    assert random_longest[0] > 8 and bucketed[0] > 8
    # Bounded: one length per boundary, the short batches a second shape each; filled: one per boundary.
    assert bounded[0] <= 8 and masked[0] <= 4 and masked[1] <= 4 and repeated[0] <= 4
    assert bounded[2] == pytest.approx(100 * shapes.BOUNDARIES.implied_waste(lengths), abs=0.06)
    assert bucketed[2] < bounded[2] < masked[2] < 50
