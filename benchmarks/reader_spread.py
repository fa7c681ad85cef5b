"""Do some readers run slower than others for their whole life, and in which stage?

Opens READERS readers of the same dataset in one process, all alive at once,
then for ROUNDS rounds lets each read the same seeded shuffled pass in turn
(one thread each, the page cache warm). A reader slow for its whole life is
slow in every round, whatever the machine did meanwhile; a slow moment of
the machine slows every reader of that round. The table gives each reader's
median rate and its median time per record in each stage
(`reader.stats.stage_seconds`), and the spread between readers beside the
spread between rounds.

Usage: python benchmarks/reader_spread.py ROOT [--readers 10] [--rounds 5] [--batch-size 64]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import sds_loader
from sds_loader.stage_times import STAGES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root")
    parser.add_argument("--readers", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    readers = [sds_loader.BatchReader(args.root, threads=args.threads) for _ in range(args.readers)]
    count = len(readers[0])
    order = np.random.default_rng(0).permutation(count)
    batches = [order[k : k + args.batch_size] for k in range(0, count, args.batch_size)]
    for reader in readers:
        reader.read(batches[0])  # the first batch untimed: shards opened
    rates = np.zeros((args.readers, args.rounds))
    per_record = np.zeros((args.readers, args.rounds, len(STAGES)))
    for round_ in range(args.rounds):
        for k, reader in enumerate(readers):
            before = reader.stats.snapshot()
            started = time.perf_counter()
            for batch in batches:
                reader.read(batch)
            rates[k, round_] = count / (time.perf_counter() - started)
            seconds = (reader.stats.snapshot() - before).stage_seconds
            per_record[k, round_] = [1e6 * seconds[stage] / count for stage in STAGES]
    print(f"{args.readers} readers x {args.rounds} rounds of {count} records, {args.threads} thread(s)")
    # Stage times are per thread and summed over threads: at 2 threads a record's
    # stages add up to about twice its share of the wall time.
    print("reader  records/s  " + "  ".join(f"{stage:>10}" for stage in STAGES) + "   (µs a record, median)")
    for k in range(args.readers):
        cells = "  ".join(f"{value:10.2f}" for value in np.median(per_record[k], axis=0))
        print(f"{k:>6}  {statistics.median(rates[k]):9,.0f}  {cells}")
    by_reader = np.median(rates, axis=1)
    by_round = np.median(rates, axis=0)
    print(
        f"spread between readers (their medians): {by_reader.min():,.0f} to {by_reader.max():,.0f} records/s"
    )
    print(f"spread between rounds (their medians):  {by_round.min():,.0f} to {by_round.max():,.0f} records/s")
    # A reader effect: a reader's rank among the readers holds from round to round.
    ranks = np.argsort(np.argsort(rates, axis=0), axis=0)
    agreement = np.corrcoef(ranks.T)[np.triu_indices(args.rounds, 1)]
    print(f"rank correlation of the readers between rounds: mean {agreement.mean():+.2f}")


if __name__ == "__main__":
    main()
