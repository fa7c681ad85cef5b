"""Short records against the decompressor's pace, stage by stage.

One reader (one thread, the page cache warm, every shard of the pass opened
by an untimed first pass) reads the same seeded shuffled pass for several
rounds; each round is set against the same records' zstd frames
decompressed alone in this process just before and just after it (the
bench's bound, `one_speed.Reference`), so a slow moment of the machine
slows both. Per batch size it prints each round's ratio and the median with
its range, and the reader's stage times in microseconds a record
(`reader.stats.stage_seconds`): what the read spends beyond decompression,
and where.

Usage: python benchmarks/short_records_pace.py [ROOT...] [--batch-sizes 16 256]
           [--rounds 5] [--records 8192]
Without ROOT, the bench's built-in 1 KiB and 8 KiB zstd variants.
"""

from __future__ import annotations

import argparse
import statistics
import time

import signal_dataset as sds
from one_speed import Reference, batches_of

import sds_loader


def measure(root: str, batch_size: int, rounds: int, records: int) -> None:
    batches = batches_of(len(sds.open(root)), records, batch_size)
    reference = Reference(root, batches)
    reader = sds_loader.BatchReader(root, threads=1)
    for batch in batches:
        reader.read(batch)  # untimed: every shard of the pass opened and its pages mapped
    count = sum(batch.size for batch in batches)
    ratios: list[float] = []
    stages: list[dict[str, float]] = []
    for _ in range(rounds):
        before = reference.rate()
        stats_before = reader.stats.snapshot()
        started = time.perf_counter()
        for batch in batches:
            reader.read(batch)
        rate = count / (time.perf_counter() - started)
        seconds = (reader.stats.snapshot() - stats_before).stage_seconds
        pace = (before + reference.rate()) / 2
        ratios.append(rate / pace)
        stages.append({stage: value / count * 1e6 for stage, value in seconds.items()})
        print(f"    {rate:9,.0f} records/s, bound {pace:9,.0f}: ratio {ratios[-1]:.3f}", flush=True)
    reader.close()
    median = {stage: statistics.median(round_[stage] for round_ in stages) for stage in stages[0]}
    print(
        f"  batches of {batch_size}: ratio median {statistics.median(ratios):.3f} "
        f"({min(ratios):.3f}-{max(ratios):.3f}); bound {1e6 / pace:.2f} us a record"
    )
    print("    stages, us a record (median): " + "  ".join(f"{k} {v:.2f}" for k, v in median.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="*")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[16, 256])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--records", type=int, default=8192, help="records a timed pass reads at most")
    args = parser.parse_args()
    roots = args.roots
    if not roots:
        from sds_loader.cli.bench import builtin

        roots = list(builtin.ensure(variants=("short-zstd", "frames-zstd"), progress=False).values())
    for root in roots:
        print(f"{root}: one thread, {args.rounds} rounds against decompression alone")
        for batch_size in args.batch_sizes:
            measure(root, batch_size, args.rounds, args.records)


if __name__ == "__main__":
    main()
