"""Turn measured rows into the table, the JSON record and the chart.

Ratios are taken within a variant only: "x vs signal_dataset" against that
variant's `Dataset.__getitems__` row (signal_dataset's own fastest batched
path, so the ratio is not flattered by a slow baseline), "% of bound" against
its bound row (zstd decompression for compressed shards, memcpy for
uncompressed ones). MB/s counts the inputs field's bytes, the same unit for
every row, so that MB/s and records/s rank the rows identically.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from sds_loader.cli.bench.plan import Plan
from sds_loader.cli.bench.timing import PASSES_NOTE, WIDE_SPREAD, Row
from sds_loader.cli.textfmt import markdown_table, rate, size, table

BASELINE_KEY = "sds_getitems"
#: What the legend calls each row a variant's "% of bound" can be taken against.
BOUND_NAMES = {"bound_decompress": "decompression alone", "bound_memcpy": "memcpy of the records"}
HEADER = [
    "variant",
    "method",
    f"records/s ({PASSES_NOTE})",
    "range over passes",
    "MB/s",
    "x vs signal_dataset",
    "% of bound",
    "note",
]
RIGHT = [False, False, True, True, True, True, True, False]


def derive(rows: Sequence[Row], plans: Mapping[str, Plan]) -> None:
    """Fill each row's MB/s, ratio to the baseline and percentage of the bound."""
    for variant, plan in plans.items():
        mine = {row.key: row for row in rows if row.variant == variant}
        baseline = mine.get(BASELINE_KEY)
        bound = mine.get(plan.bound_key)
        if bound is not None:
            bound.is_bound = True
        for row in mine.values():
            speed = row.records_per_s
            if speed is None:
                continue
            row.mb_per_s = speed * plan.record_bytes / 1e6
            if baseline is not None and baseline.records_per_s:
                row.x_vs_signal_dataset = speed / baseline.records_per_s
            # Another bound (memcpy beside a zstd bound) is context, not a method.
            other_bound = row.key.startswith("bound_") and row is not bound
            if bound is not None and bound.records_per_s and not other_bound:
                row.pct_of_bound = 100 * speed / bound.records_per_s


#: Notes longer than this are cut in the table; bench.json keeps them whole.
NOTE_WIDTH = 72


def _note(text: str) -> str:
    return text if len(text) <= NOTE_WIDTH else text[: NOTE_WIDTH - 3].rstrip() + "..."


def _cells(row: Row) -> list[str]:
    speed = row.records_per_s
    if speed is None:
        return [row.variant, row.label, "-", "-", "-", "-", "-", _note(row.note or row.status)]
    return [
        row.variant,
        row.label,
        rate(speed),
        _range(row),
        rate(row.mb_per_s or 0.0),
        f"{row.x_vs_signal_dataset:.2f}x" if row.x_vs_signal_dataset is not None else "-",
        ("bound" if row.is_bound else f"{row.pct_of_bound:.0f}%") if row.pct_of_bound is not None else "-",
        _note(row.note),
    ]


def _range(row: Row) -> str:
    rates = row.pass_rates or []
    if len(rates) < 2 or row.spread is None:
        return "-"
    wide = " wide" if row.spread > WIDE_SPREAD else ""
    return f"{rate(min(rates))}-{rate(max(rates))} ({row.spread:.2f}x{wide})"


def wide_rows(rows: Sequence[Row]) -> str:
    """A line naming the rows whose passes spread wider than WIDE_SPREAD, or ""."""
    wide = [f"{row.variant}: {row.label}" for row in rows if (row.spread or 0) > WIDE_SPREAD]
    if not wide:
        return ""
    return (
        f"{len(wide)} row(s) spread over {WIDE_SPREAD:.2f}x between passes, so one figure of "
        f"them would mislead: {'; '.join(wide)}. Run again on a quiet machine (no build, test "
        "or other job beside it) before comparing them."
    )


def text(rows: Sequence[Row]) -> str:
    return table(HEADER, [_cells(row) for row in rows], right=RIGHT)


def markdown(rows: Sequence[Row]) -> str:
    return markdown_table(HEADER, [_cells(row) for row in rows], right=RIGHT)


def legend(plans: Mapping[str, Plan], batch_size: int) -> str:
    parts = []
    for variant, plan in plans.items():
        target = f", target {plan.target!r}" if plan.target else ", no target"
        parts.append(
            f"{variant}: {plan.source or plan.uri}; {len(plan.batches)} shuffled batches of "
            f"{batch_size}; field {plan.inputs!r} ({size(plan.record_bytes)} a record){target}; "
            f"% of bound is of {BOUND_NAMES.get(plan.bound_key, plan.bound_key)}"
        )
    return "\n".join(parts)


def document(rows: Sequence[Row], plans: Mapping[str, Plan], context: Mapping[str, Any]) -> dict[str, Any]:
    return {
        **context,
        "datasets": {
            variant: {
                "uri": plan.uri,
                "inputs": plan.inputs,
                "target": plan.target,
                "record_bytes": plan.record_bytes,
                "compression": plan.compression,
                "batches": len(plan.batches),
                "records_per_pass": plan.records,
                "bound": plan.bound_key,
            }
            for variant, plan in plans.items()
        },
        "rows": [
            {
                "variant": row.variant,
                "key": row.key,
                "label": row.label,
                "status": row.status,
                "records": row.records,
                "seconds": row.seconds,
                "passes": row.passes,
                "pass_rates": row.pass_rates,
                "spread": row.spread,
                "records_per_s": row.records_per_s,
                "mb_per_s": row.mb_per_s,
                "x_vs_signal_dataset": row.x_vs_signal_dataset,
                "pct_of_bound": row.pct_of_bound,
                "is_bound": row.is_bound,
                "note": row.note,
                "stage_seconds": row.stage_seconds,
            }
            for row in rows
        ],
    }


def write_json(path: str, value: Mapping[str, Any]) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(value, handle, indent=2)
        handle.write("\n")


def _colour(row: Row) -> str:
    if row.key.startswith("bound_"):
        return "#9a9a9a"
    if row.key.startswith(("batchreader", "torch")):
        return "#1f77b4"  # this package
    return "#ff7f0e"  # what a user has without it


def chart(path: str, rows: Sequence[Row], plans: Mapping[str, Plan]) -> str | None:
    """Write a bar chart of records/s per variant; None, or why it could not."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter
    except ImportError as exc:
        return f"no chart: matplotlib is not installed ({exc}); pip install 'sds-loader[bench]'"
    variants = list(plans)
    height = 0.8 + 0.7 * len(variants) + 0.3 * len(rows)
    figure, axes = plt.subplots(len(variants), 1, figsize=(9, height), squeeze=False)
    for axis, variant in zip(axes[:, 0], variants, strict=True):
        mine = [row for row in rows if row.variant == variant]
        labels = [row.label for row in mine]
        speeds = [row.records_per_s or 0.0 for row in mine]
        colours = [_colour(row) for row in mine]
        positions = list(range(len(mine)))[::-1]
        # A log axis: bounds run up to a thousand times the slowest reader
        # (memcpy of 1 KiB records), which on a linear axis leaves every
        # other bar a sliver.
        measured = [speed for speed in speeds if speed > 0]
        low = min(measured) if measured else 1.0
        top = max(measured) if measured else 10.0
        floor = low / 3
        axis.barh(positions, [max(speed, floor) - floor for speed in speeds], left=floor, color=colours)
        axis.set_xscale("log")
        axis.set_yticks(positions, labels, fontsize=8)
        for position, row, speed in zip(positions, mine, speeds, strict=True):
            label = rate(speed) if row.records_per_s else row.status
            axis.text(max(speed, floor) * 1.05, position, label, va="center", fontsize=7)
        axis.set_xlim(floor, top * 4)
        axis.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
        axis.set_title(f"{variant}: records/s, log scale (higher is better)", fontsize=9)
    figure.text(
        0.01,
        0.005,
        "orange: without sds-loader   blue: sds-loader   grey: bounds (one core)",
        fontsize=7,
        color="#555555",
    )
    figure.tight_layout(rect=(0, 0.02, 1, 1))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return None
