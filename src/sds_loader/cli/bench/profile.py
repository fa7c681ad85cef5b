"""`sds-loader bench --profile`: where each row's time went, stage by stage.

Every row that reads through sds-loader carries its median pass's stage
times (`reader.stats.stage_seconds`, summed over threads and DataLoader
workers); this module prints them as shares of that time and, with
`--plot FILE`, draws them as stacked bars. Shares rather than seconds: on a
shared machine a row's speed moves from run to run far more than where its
time goes.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from sds_loader.cli.bench.timing import Row
from sds_loader.cli.textfmt import markdown_table, table
from sds_loader.stage_times import STAGES

HEADER = ["variant", "method", "µs a record", *STAGES]
RIGHT = [False, False, *([True] * (len(STAGES) + 1))]
#: One colour per stage, in STAGES order (the core's, then Python's).
COLOURS = ("#8c564b", "#d62728", "#9467bd", "#1f77b4", "#2ca02c", "#ff7f0e", "#e377c2", "#7f7f7f")


def profiled(rows: Sequence[Row]) -> list[Row]:
    """The rows that have stage times to show."""
    # A row read with stage times off timed nothing: it has no shares to show.
    return [row for row in rows if row.records and row.stage_seconds and sum(row.stage_seconds.values()) > 0]


def shares(row: Row) -> list[float]:
    """Each stage's share of the row's summed stage time, in STAGES order."""
    assert row.stage_seconds is not None
    total = sum(row.stage_seconds.values())
    return [row.stage_seconds.get(stage, 0.0) / total for stage in STAGES]


def _cells(row: Row) -> list[str]:
    assert row.stage_seconds is not None
    per_record = 1e6 * sum(row.stage_seconds.values()) / row.records
    return [
        row.variant,
        row.label,
        f"{per_record:.1f}",
        *(f"{100 * share:.0f}%" if share >= 0.005 else "-" for share in shares(row)),
    ]


def text(rows: Sequence[Row]) -> str:
    """The shares table, as the terminal shows it."""
    return table(HEADER, [_cells(row) for row in profiled(rows)], right=RIGHT)


def markdown(rows: Sequence[Row]) -> str:
    """The shares table, as docs/performance.md shows it."""
    return markdown_table(HEADER, [_cells(row) for row in profiled(rows)], right=RIGHT)


def plot(path: str, rows: Sequence[Row]) -> None:
    """Draw each profiled row's stage shares as one stacked horizontal bar."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ValueError(f"--plot needs matplotlib ({exc}); pip install 'sds-loader[bench]'") from None
    mine = profiled(rows)
    if not mine:
        raise ValueError("--plot found no row read by sds-loader to draw")
    labels = [f"{row.variant}: {row.label}" for row in mine]
    positions = list(range(len(mine)))[::-1]
    figure, axis = plt.subplots(figsize=(10, 1.2 + 0.32 * len(mine)))
    left = [0.0] * len(mine)
    for s, (stage, colour) in enumerate(zip(STAGES, COLOURS, strict=True)):
        widths = [100 * shares(row)[s] for row in mine]
        axis.barh(positions, widths, left=left, color=colour, label=stage)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    axis.set_yticks(positions, labels, fontsize=7)
    axis.set_xlim(0, 100)
    axis.set_xlabel("share of the reads' time, summed over threads and workers (%)", fontsize=8)
    axis.legend(
        ncol=len(STAGES), fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.6 / len(mine))
    )
    axis.set_title("sds-loader bench --profile: where each row's time went", fontsize=9)
    figure.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
