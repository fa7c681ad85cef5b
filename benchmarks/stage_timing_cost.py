"""What timing the stages costs a read: the same batches with stage times off, on every run, and sampled.

Readers of one dataset (one thread each) take turns reading the same seeded
shuffled pass, PAIRS times over, in a fresh order each time; each pass's
thread CPU time is kept (less moved by other work on a shared machine than
wall time). The figure is the median, over the pairs, of each setting's
time against the untimed reader's in the same pair, which cancels drift
that a comparison of separate runs would not.

Usage: python benchmarks/stage_timing_cost.py ROOT [--pairs 31] [--batch-size 256]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import numpy as np

import sds_loader
from sds_loader import stage_times

SETTINGS = {
    "off": 0,
    "every run": 1,
    f"one run in {stage_times.DEFAULT_SAMPLING}": stage_times.DEFAULT_SAMPLING,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root")
    parser.add_argument("--pairs", type=int, default=31)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--batches", type=int, default=32)
    args = parser.parse_args()
    readers = {}
    for name, every in SETTINGS.items():
        with stage_times.sampled_every(every):
            readers[name] = sds_loader.BatchReader(args.root, threads=1)
    count = len(next(iter(readers.values())))
    rng = np.random.default_rng(0)
    batches = [rng.permutation(count)[: args.batch_size] for _ in range(args.batches)]
    for reader in readers.values():
        for batch in batches:
            reader.read(batch)  # every reader's mapping filled, scratch grown
    seconds: dict[str, list[float]] = {name: [] for name in readers}
    shuffle = random.Random(1)
    for _ in range(args.pairs):
        names = list(readers)
        shuffle.shuffle(names)
        for name in names:
            started = time.thread_time()
            for batch in batches:
                readers[name].read(batch)
            seconds[name].append(time.thread_time() - started)
    records = args.batches * args.batch_size
    print(f"{args.pairs} rounds of {args.batches} batches of {args.batch_size} ({records} records), 1 thread")
    for name, spent in seconds.items():
        ratios = [a / b for a, b in zip(spent, seconds["off"], strict=True)]
        quartiles = statistics.quantiles(ratios, n=4)
        print(
            f"{name:>16}: {1e6 * statistics.median(spent) / records:6.2f} µs a record (median); "
            f"against off in the same round: median {100 * (statistics.median(ratios) - 1):+.1f}% "
            f"(quartiles {100 * (quartiles[0] - 1):+.1f}% to {100 * (quartiles[2] - 1):+.1f}%)"
        )


if __name__ == "__main__":
    main()
