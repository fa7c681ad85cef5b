"""Windows of long captures: what reading only the window is worth.

``sds-loader bench --windows`` (or ``python -m sds_loader.cli.bench.windows``) writes (once, cached beside the
built-in dataset) a long-capture dataset: 64 captures of 1 Mi complex64
samples (8 MiB each) along ``time``, uncompressed and as signal_dataset's
default zstd, and reads 4,096-sample windows at seeded random starts from
it, every capture in every batch, shuffled:

- signal_dataset reads each capture whole and slices the window (the baseline);
- BatchReader with a window, uncompressed, `verify_checksums=False`: only the
  window's bytes are read;
- the same with checksums on, once its chunks were verified earlier in this
  process: the untimed warm-up epoch hashes every chunk whole, which a
  reader does once per chunk, so the timed epochs hash nothing and read
  only windows. That is the state of every epoch but a job's first, and the
  label says so rather than suggest the hashing is timed;
- zstd, against BatchReader decoding each whole capture: decompression stops
  at the window's end, about halfway on average.

Each row is the median of several passes; the ratios are within one run, so
a loaded machine slows every row alike more than it skews the ratios.

Then the batch-shape rows of `sds_loader.cli.bench.shapes`: the distinct
shapes an epoch of padded windows takes, and its share of padding, for each
way of batching records of lengths spread 1:10.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator

import numpy as np
import signal_dataset as sds

from sds_loader import BatchReader, Window
from sds_loader.cli.bench import shapes
from sds_loader.cli.bench.builtin import cache_dir, write_once

CAPTURES = 64
SAMPLES = 1 << 20
WINDOW = 4096
BATCH = 16
#: The row whose reader hashed every chunk in its untimed warm-up epoch.
VERIFIED_EARLIER = "BatchReader window, checksums on, chunks verified earlier in this process"
#: An epoch's batches: (ordinals, window starts) each.
Batches = list[tuple[np.ndarray, np.ndarray]]
#: Bump when the captures' content or layout changes.
VERSION = 1
VARIANTS: dict[str, str | None] = {"uncompressed": "group_size:1,uncompressed", "zstd": None}


def capture(ordinal: int) -> sds.Record:
    rng = np.random.default_rng(ordinal)
    data = rng.standard_normal(2 * SAMPLES, dtype=np.float32).view(np.complex64)
    return sds.Record(
        id=f"long-{ordinal:04d}",
        fields={"samples": sds.Field(data, axes=(sds.Axis("time", SAMPLES),))},
        metadata={"label": ordinal % 4},
    )


def ensure(captures: int = CAPTURES, cache: str | None = None) -> dict[str, str]:
    """The long-capture dataset's variants (name -> root), writing any not yet cached."""
    return {
        variant: write_once(
            os.path.join(cache_dir(cache), f"windows-v{VERSION}-{captures}x{SAMPLES}-{variant}"),
            captures,
            capture,
            per_shard=16,
            dataset_id="sds-loader-windows",
            writer_options=options,
        )
        for variant, options in VARIANTS.items()
    }


def epoch(captures: int, seed: int) -> Batches:
    """Every capture once, shuffled, in batches, each with a random window start."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(captures)
    starts = rng.integers(0, SAMPLES - WINDOW + 1, size=captures)
    return [(order[k : k + BATCH], starts[k : k + BATCH]) for k in range(0, captures, BATCH)]


def signal_dataset_slices(root: str) -> Callable[[Batches], int]:
    dataset = sds.open(root)

    def run(batches: Batches) -> int:
        for ordinals, starts in batches:
            records = dataset.__getitems__(ordinals.tolist())
            held = [
                r["samples"].data[s : s + WINDOW].copy()
                for r, s in zip(records, starts.tolist(), strict=True)
            ]
            del held
        return sum(len(o) for o, _ in batches)

    return run


def windows(root: str, *, verify: bool, threads: int) -> Callable[[Batches], int]:
    reader = BatchReader(
        root, fields=("samples",), threads=threads, verify_checksums=verify, window=Window("time", WINDOW)
    )

    def run(batches: Batches) -> int:
        for ordinals, starts in batches:
            reader.read(ordinals, starts=starts)
        return sum(len(o) for o, _ in batches)

    return run


def whole(root: str, *, threads: int) -> Callable[[Batches], int]:
    reader = BatchReader(root, fields=("samples",), threads=threads)

    def run(batches: Batches) -> int:
        for ordinals, _ in batches:
            reader.read(ordinals)
        return sum(len(o) for o, _ in batches)

    return run


#: A timed pass reads whole epochs until it has taken at least this long, so
#: that the fast rows are not timed on a millisecond.
PASS_SECONDS = 0.5


def rate(run: Callable[[Batches], int], epochs: Iterator[Batches], passes: int) -> float:
    """Median records/s over `passes` passes, after one untimed warm-up epoch."""
    run(next(epochs))
    rates = []
    for _ in range(passes):
        records, started = 0, time.perf_counter()
        while not records or time.perf_counter() - started < PASS_SECONDS:
            records += run(next(epochs))
        rates.append(records / (time.perf_counter() - started))
    return statistics.median(rates)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--captures", type=int, default=CAPTURES)
    parser.add_argument("--passes", type=int, default=3, help="timed epochs per row (median kept)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cache-dir", default=None, help="where the long captures are cached")
    parser.add_argument(
        "--shape-records", type=int, default=shapes.RECORDS, help="captures the batch-shape rows batch"
    )
    args = parser.parse_args(argv)
    roots = ensure(args.captures, args.cache_dir)
    print(
        f"long captures: {args.captures} of {SAMPLES:,} complex64 samples, "
        f"{WINDOW:,}-sample windows at random starts, batches of {BATCH}, "
        f"{args.threads} thread(s); cached under {cache_dir(args.cache_dir)}",
        flush=True,
    )

    def epochs(seed: int = 0) -> Iterator[Batches]:
        while True:
            yield epoch(args.captures, seed)
            seed += 1

    rows: list[tuple[str, str, float, str, float]] = []

    def add(variant: str, label: str, value: float, against: str, base: float) -> None:
        rows.append((variant, label, value, against, value / base))
        print(f"{variant:13} {label:58} {value:10,.0f} rec/s  {value / base:7.1f}x {against}", flush=True)

    un, zs = roots["uncompressed"], roots["zstd"]
    base_un = rate(signal_dataset_slices(un), epochs(), args.passes)
    add("uncompressed", "signal_dataset: whole capture, then slice", base_un, "signal_dataset", base_un)
    add(
        "uncompressed",
        "BatchReader window, verify_checksums=False",
        rate(windows(un, verify=False, threads=args.threads), epochs(), args.passes),
        "signal_dataset",
        base_un,
    )
    # The warm-up epoch verifies every chunk whole; the timed epochs hash nothing.
    add(
        "uncompressed",
        VERIFIED_EARLIER,
        rate(windows(un, verify=True, threads=args.threads), epochs(), args.passes),
        "signal_dataset",
        base_un,
    )
    base_zs = rate(signal_dataset_slices(zs), epochs(), args.passes)
    add("zstd", "signal_dataset: whole capture, then slice", base_zs, "signal_dataset", base_zs)
    whole_zs = rate(whole(zs, threads=args.threads), epochs(), args.passes)
    add("zstd", "BatchReader, whole capture", whole_zs, "signal_dataset", base_zs)
    add(
        "zstd",
        "BatchReader window (decompression stops at its end)",
        rate(windows(zs, verify=True, threads=args.threads), epochs(), args.passes),
        "whole capture",
        whole_zs,
    )
    shapes.report(args.shape_records, args.cache_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
