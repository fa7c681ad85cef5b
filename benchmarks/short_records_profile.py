"""Reads shuffled batches of short records, for profiling the per-record cost.

The records are the built-in bench's short captures (256 x 2 int16, a
`label` and an `snr_db` in metadata) written by signal_dataset's default
zstd writer, 4,096 to a shard. The dataset is written once into CACHE_DIR
and reused.

    python benchmarks/short_records_profile.py CACHE_DIR --batches 50
    python benchmarks/short_records_profile.py CACHE_DIR --batch-size 16 --repeat 5

Under callgrind, run it twice with different --batches and subtract, so that
imports and opening the reader cancel out (benchmarks/callgrind_split.py):

    valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.10 \\
        python benchmarks/short_records_profile.py CACHE_DIR --batches 10
    valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.50 \\
        python benchmarks/short_records_profile.py CACHE_DIR --batches 50
    python benchmarks/callgrind_split.py /tmp/cg.10 /tmp/cg.50

Each pass reads the same seeded batches (no record twice within a pass, as
an epoch reads them), after one untimed warm-up batch; with --repeat it
prints each pass's records/s and their median.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

SHARDS = 4
PER_SHARD = 4096


def ensure(cache_dir: str, shards: int) -> str:
    import shutil

    import signal_dataset as sds

    from sds_loader.cli.bench.builtin import short_capture

    root = os.path.join(cache_dir, f"short-profile-{shards}x{PER_SHARD}")
    try:
        if len(sds.open(root)) == shards * PER_SHARD:
            return root
    except Exception:  # anything unreadable is rebuilt
        pass
    building = f"{root}.building-{os.getpid()}"
    shutil.rmtree(building, ignore_errors=True)
    print(f"writing {shards} x {PER_SHARD} short records to {root}", file=sys.stderr)
    written = [
        sds.write_shard(
            (short_capture(n * PER_SHARD + k) for k in range(PER_SHARD)), building, work_id=f"{n:06d}"
        )
        for n in range(shards)
    ]
    sds.publish(building, written, dataset_id="short-profile", snapshot_id="v1")
    shutil.rmtree(root, ignore_errors=True)
    os.rename(building, root)
    return root


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("cache_dir")
    parser.add_argument("--shards", type=int, default=SHARDS)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=1, help="timed passes (median printed)")
    args = parser.parse_args()

    root = ensure(args.cache_dir, args.shards)
    from sds_loader import BatchReader

    reader = BatchReader(root, fields=["samples"], targets=["label", "snr_db"], threads=args.threads)
    count = len(reader)
    needed = (args.batches + 1) * args.batch_size
    if needed > count:
        sys.exit(
            f"{args.batches} + 1 batches of {args.batch_size} need {needed} records; the dataset has {count}"
        )
    order = np.random.default_rng(0).permutation(count)
    warm, order = order[: args.batch_size], order[args.batch_size :]
    batches = [order[k * args.batch_size : (k + 1) * args.batch_size] for k in range(args.batches)]
    reader.read(warm)
    rates = []
    for _ in range(args.repeat):
        began = time.perf_counter()
        for batch in batches:
            reader.read(batch)
        elapsed = time.perf_counter() - began
        rates.append(args.batches * args.batch_size / elapsed)
    print(
        f"batch {args.batch_size} threads {args.threads}: "
        + " ".join(f"{rate:,.0f}" for rate in rates)
        + f" rec/s; median {statistics.median(rates):,.0f}"
    )


if __name__ == "__main__":
    main()
