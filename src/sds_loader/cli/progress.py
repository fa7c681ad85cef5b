"""Progress for the commands: a live bar in a terminal, whole lines in a log.

tqdm draws its bar with carriage returns. In a terminal that is what a user
wants, and it must draw at once: the bench's timed passes are shorter than
any display delay, and a delayed bar shows nothing at all. In a log (stderr
not a terminal: CI, `2> file`, `| tee`) the same bytes become one line that
never ends, with the next message glued to it. There, `LineProgress` writes a
whole line every LOG_INTERVAL seconds of a long task and one when it ends,
and nothing for tasks shorter than that.
"""

from __future__ import annotations

import sys
import time
from typing import IO, Protocol

from tqdm import tqdm

from sds_loader.cli.textfmt import size

#: Seconds between lines in a log; tasks shorter than this print none.
LOG_INTERVAL = 10.0


class Progress(Protocol):
    def update(self, n: int = 1) -> object: ...
    def reset(self, total: int | None = None) -> object: ...
    def close(self) -> object: ...
    def __enter__(self) -> Progress: ...
    def __exit__(self, *exc: object) -> object: ...


def progress(
    total: int,
    desc: str,
    *,
    unit: str = "rec",
    in_bytes: bool = False,
    enabled: bool = True,
    leave: bool = True,
    file: IO[str] | None = None,
) -> Progress:
    """A bar on a terminal, lines in a log, nothing when not `enabled`."""
    stream = file if file is not None else sys.stderr
    if enabled and not _is_terminal(stream):
        return LineProgress(total, desc, unit="B" if in_bytes else unit, in_bytes=in_bytes, file=stream)
    bar: Progress = tqdm(
        total=total,
        desc=desc,
        unit="B" if in_bytes else unit,
        unit_scale=in_bytes,
        leave=leave,
        disable=not enabled,
        file=stream,
        dynamic_ncols=True,
    )
    return bar


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class LineProgress:
    """Whole lines of progress, at most one every `interval` seconds."""

    def __init__(
        self,
        total: int,
        desc: str,
        *,
        unit: str,
        in_bytes: bool,
        file: IO[str],
        interval: float | None = None,
    ) -> None:
        self.total = total
        self.desc = desc
        self.unit = unit
        self.in_bytes = in_bytes
        self.file = file
        self.interval = LOG_INTERVAL if interval is None else interval
        self.n = 0
        self.started = self.last = time.monotonic()
        self.lines = 0

    def _amount(self, n: float) -> str:
        return size(n) if self.in_bytes else f"{n:,.0f} {self.unit}"

    def _write(self, text: str) -> None:
        print(f"{self.desc}: {text}", file=self.file, flush=True)
        self.lines += 1

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            share = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
            done = self._amount(self.n) + (f" of {self._amount(self.total)}" if self.total else "")
            self._write(f"{done}{share}, {now - self.started:.0f} s")

    def reset(self, total: int | None = None) -> None:
        """Start counting again (another pass of the same task); the clock keeps running."""
        self.n = 0
        if total is not None:
            self.total = total

    def close(self) -> None:
        elapsed = time.monotonic() - self.started
        if self.lines or elapsed >= self.interval:
            self._write(f"done, {self._amount(self.n)} in {elapsed:.0f} s")
            self.lines = 0
            self.started = self.last = time.monotonic()

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
