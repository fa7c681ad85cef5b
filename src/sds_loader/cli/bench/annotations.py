"""Annotation rows with each batch: what they add, against signal_dataset's per-row reads.

``sds-loader bench --annotations`` (or ``python -m
sds_loader.cli.bench.annotations``) writes (once, cached beside the built-in
dataset) captures with bursts and their annotation set (``sds-loader synth
--bursts``: 0 to 4 bursts a capture, ``intervals`` and ``freq``), then times
shuffled batches three ways, batch by batch in turn so that other work on
the machine slows them alike:

- signal_dataset: ``AnnotationSet.__getitem__`` for every row of the batch
  (a stat of the shard, a reader open and a metadata read for the identity
  check, each row);
- BatchReader reading the batch's windows with the set's rows, clipped to
  the windows, ragged;
- the same BatchReader without annotations: the difference is what the rows
  add to a batch read.

Each figure is a median over batches, per row. The ratio is the one to
read: signal_dataset's time per row over the time a row adds here.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np
import signal_dataset as sds

from sds_loader import Annotations, BatchReader, Window
from sds_loader.cli.bench.builtin import cache_dir

CAPTURES = 2048
SAMPLES = 4096
WINDOW = 1024
BATCH = 256
#: Bump when the captures' content or layout changes.
VERSION = 1


def ensure(captures: int = CAPTURES, cache: str | None = None) -> str:
    """The captures-with-bursts dataset, written once under the cache."""
    from sds_loader.cli import synthetic_bursts

    root = os.path.join(cache_dir(cache), f"bursts-v{VERSION}-{captures}x{SAMPLES}")
    if not os.path.isdir(root):
        os.makedirs(os.path.dirname(root), exist_ok=True)
        synthetic_bursts.write_burst_captures(root, captures, SAMPLES, seed=0)
    return root


def timed(run: Callable[[], object]) -> float:
    gc.collect()
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--captures", type=int, default=CAPTURES)
    parser.add_argument("--batches", type=int, default=8, help="timed batches (median kept)")
    parser.add_argument("--batch-size", type=int, default=BATCH)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cache-dir", default=None, help="where the dataset is cached")
    args = parser.parse_args(argv)
    root = ensure(args.captures, args.cache_dir)
    batch = min(args.batch_size, args.captures)
    print(
        f"captures with bursts: {args.captures} of {SAMPLES:,} complex64 samples, {WINDOW:,}-sample "
        f"windows, batches of {batch}, {args.threads} thread(s); {root}",
        flush=True,
    )
    window = Window("time", WINDOW, crop="random")
    bursts = Annotations("bursts", ("intervals", "freq"), positions={"intervals": "time"})
    plain = BatchReader(root, fields=("samples",), window=window, threads=args.threads)
    annotated = BatchReader(
        root, fields=("samples",), window=window, threads=args.threads, annotations=[bursts]
    )
    reference = sds.open(root).annotations["bursts"]
    rng = np.random.default_rng(0)
    # One untimed pass over every record warms the page cache and every reader.
    for first in range(0, args.captures, batch):
        ordinals = np.arange(first, min(first + batch, args.captures))
        plain.read(ordinals)
        annotated.read(ordinals)
    per_row: dict[str, list[float]] = {"signal_dataset": [], "with": [], "without": []}
    for _ in range(args.batches):
        ordinals = rng.permutation(args.captures)[:batch]
        starts = plain.window_starts(ordinals, seed=int(rng.integers(1 << 30)))
        listed = ordinals.tolist()
        per_row["signal_dataset"].append(timed(lambda: [reference[i] for i in listed]) / batch)
        per_row["with"].append(timed(lambda: annotated.read(ordinals, starts=starts)) / batch)
        per_row["without"].append(timed(lambda: plain.read(ordinals, starts=starts)) / batch)
    base = statistics.median(per_row["signal_dataset"])
    with_rows = statistics.median(per_row["with"])
    without = statistics.median(per_row["without"])
    added = statistics.median(w - o for w, o in zip(per_row["with"], per_row["without"], strict=True))
    print(f"{'signal_dataset AnnotationSet[i], per row':52} {base * 1e6:9.1f} us")
    print(f"{'BatchReader batch read with the set, per row':52} {with_rows * 1e6:9.1f} us")
    print(f"{'BatchReader batch read without it, per row':52} {without * 1e6:9.1f} us")
    print(
        f"{'what a row adds to a batch read':52} {added * 1e6:9.1f} us"
        f"   ({base / added if added > 0 else float('inf'):.0f}x less than signal_dataset's row)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
