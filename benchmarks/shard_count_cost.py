"""Does a short record cost more in 10,000 shards of 16 records than in 4 shards?

Writes (once, under DIR) 160,000 records of 1 KiB int16 captures twice: as
`many_shards`' 10,000 shards of 16 (16 written by signal_dataset's writer,
the rest hard links to them under names of their own) and as 4 shards of
40,000 written by signal_dataset's writer. One reader of each (one thread)
reads a seeded shuffled pass of the whole dataset in batches of 256 (the
page cache warmed by another reader first): a first pass, in which the
reader opens every shard, then --rounds warm passes,
taking turns between the two readers so that a slow moment of the machine
slows both. Prints microseconds a record (median and range), the stage
times, and the ratio of the two.

Usage: python benchmarks/shard_count_cost.py [DIR] [--rounds 5] [--batch-size 256]
DIR defaults to the bench's cache directory.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import signal_dataset as sds

import sds_loader
from sds_loader.cli.bench import builtin, many_shards

RECORDS = 160_000
FEW = 4


def ensure(directory: Path) -> dict[str, str]:
    many = directory / f"shard-count-{RECORDS // many_shards.RECORDS_PER_SHARD}"
    few = directory / f"shard-count-{FEW}"
    if not (many / "_SUCCESS").exists():
        many.mkdir(parents=True, exist_ok=True)
        many_shards.write(many, RECORDS // many_shards.RECORDS_PER_SHARD)
        (many / "_SUCCESS").touch()
    if not (few / "_SUCCESS").exists():
        few.mkdir(parents=True, exist_ok=True)
        per = RECORDS // FEW
        shards = [
            sds.write_shard((many_shards.capture(s * per + k) for k in range(per)), str(few), work_id=f"w{s}")
            for s in range(FEW)
        ]
        sds.publish(str(few), shards, dataset_id="shard-count", snapshot_id="v1")
        (few / "_SUCCESS").touch()
    return {f"{FEW} shards": str(few), f"{RECORDS // many_shards.RECORDS_PER_SHARD:,} shards": str(many)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=256)
    args = parser.parse_args()
    roots = ensure(args.directory or Path(builtin.cache_dir()))
    order = np.random.default_rng(0).permutation(RECORDS)
    batches = [order[k : k + args.batch_size] for k in range(0, RECORDS, args.batch_size)]
    readers, first = {}, {}
    for name, root in roots.items():
        warming = sds_loader.BatchReader(root, threads=1)
        for batch in batches:
            warming.read(batch)  # the page cache warm, so that the first pass times opening alone
        warming.close()
        reader = sds_loader.BatchReader(root, threads=1)
        started = time.perf_counter()
        for batch in batches:
            reader.read(batch)
        first[name] = (time.perf_counter() - started) / RECORDS * 1e6
        readers[name] = reader
    warm: dict[str, list[float]] = {name: [] for name in roots}
    stages: dict[str, list[dict[str, float]]] = {name: [] for name in roots}
    for _ in range(args.rounds):
        for name, reader in readers.items():
            before = reader.stats.snapshot()
            started = time.perf_counter()
            for batch in batches:
                reader.read(batch)
            warm[name].append((time.perf_counter() - started) / RECORDS * 1e6)
            seconds = (reader.stats.snapshot() - before).stage_seconds
            stages[name].append({stage: value / RECORDS * 1e6 for stage, value in seconds.items()})
    for name in roots:
        times = warm[name]
        median = {k: statistics.median(s[k] for s in stages[name]) for k in stages[name][0]}
        print(
            f"{name:>14}: first pass {first[name]:.2f} us a record; warm {statistics.median(times):.2f} "
            f"({min(times):.2f}-{max(times):.2f}); stages "
            + " ".join(f"{k} {v:.2f}" for k, v in median.items())
        )
    few, many = roots
    rounds = " ".join(f"{m / f:.2f}" for f, m in zip(warm[few], warm[many], strict=True))
    print(
        f"{many} against {few}: warm {statistics.median(warm[many]) / statistics.median(warm[few]):.2f}x "
        f"(each round: {rounds}); first pass {first[many] / first[few]:.2f}x"
    )


if __name__ == "__main__":
    main()
