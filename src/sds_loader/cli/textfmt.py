"""Plain-text rendering shared by the commands: sizes, rates, aligned tables.

Kept free of any knowledge of datasets so that `inspect`, `verify` and `bench`
print numbers the same way (decimal megabytes throughout, as disk and network
throughput are usually quoted).
"""

from __future__ import annotations

from collections.abc import Sequence


def size(n: float) -> str:
    """Bytes as B, kB, MB, GB or TB with three significant digits (decimal units)."""
    value = float(n)
    if abs(value) < 1000:
        return f"{int(value)} B"
    for unit in ("kB", "MB", "GB", "TB"):
        value /= 1000
        if abs(value) < 1000:
            break
    return f"{value:.3g} {unit}" if abs(value) < 100 else f"{value:.0f} {unit}"


def rate(n: float) -> str:
    """A count per second with thousands separators and no false precision."""
    if n >= 100:
        return f"{n:,.0f}"
    if n >= 10:
        return f"{n:.1f}"
    return f"{n:.2f}"


def table(
    header: Sequence[str], rows: Sequence[Sequence[str]], *, right: Sequence[bool] | None = None
) -> str:
    """Columns padded to their widest cell; `right[i]` right-aligns column i."""
    align = list(right) if right is not None else [False] * len(header)
    widths = [len(cell) for cell in header]
    for row in rows:
        widths = [max(width, len(cell)) for width, cell in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        padded = [
            cell.rjust(width) if flush else cell.ljust(width)
            for cell, width, flush in zip(cells, widths, align, strict=True)
        ]
        return "  ".join(padded).rstrip()

    return "\n".join([line(header), line(["-" * width for width in widths])] + [line(row) for row in rows])


def markdown_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], *, right: Sequence[bool] | None = None
) -> str:
    """The same table as GitHub-flavoured markdown."""
    align = list(right) if right is not None else [False] * len(header)

    def escape(cell: str) -> str:
        return cell.replace("|", "\\|")

    lines = ["| " + " | ".join(escape(cell) for cell in header) + " |"]
    lines.append("|" + "|".join("---:" if flush else "---" for flush in align) + "|")
    lines.extend("| " + " | ".join(escape(cell) for cell in row) + " |" for row in rows)
    return "\n".join(lines)
