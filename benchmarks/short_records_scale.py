"""Does a short record cost the same in a corpus of 256 shards as in one of 4?

Writes (once, into CACHE_DIR) the short records of
`short_records_profile.py` (256 x 2 int16, `label` and `snr_db`, signal_dataset's
default zstd writer, 4,096 to a shard) as 4 shards (16,384 records) and as
256 shards (1,048,576 records), then for each, with default settings and
one thread:

- a new reader's open plus its first shuffled batch;
- shuffled batches of 256 drawn from the whole dataset, epoch after epoch:
  a first pass, which also maps the chunks' pages into the process (a page
  fault every few records), then --repeat warm passes (their median), as
  records/s and microseconds a record;
- signal_dataset's ``Dataset.__getitems__`` on the first --sds-batches of the
  same batches, and the ratio;
- what the reader keeps per shard it has indexed and per record those
  shards hold (`BatchReader.index_bytes`), and the process's peak RSS.

    python benchmarks/short_records_scale.py CACHE_DIR --repeat 3

Writing the 256-shard dataset takes a few minutes; later runs reuse it.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from short_records_profile import PER_SHARD, ensure  # noqa: E402

BATCH = 256


def measure(root: str, batches: int, repeat: int, sds_batches: int) -> dict[str, float]:
    import signal_dataset as sds

    from sds_loader import BatchReader

    count = len(sds.open(root))
    rng = np.random.default_rng(0)
    # Shuffled epochs back to back, as many as the passes need: a small
    # dataset is read again, as training on it would.
    needed = (1 + batches * (repeat + 1)) * BATCH
    order = np.concatenate([rng.permutation(count) for _ in range(-(-needed // count))])
    plan = [order[k * BATCH : (k + 1) * BATCH] for k in range(needed // BATCH)]

    began = time.perf_counter()
    reader = BatchReader(root, fields=["samples"], targets=["label", "snr_db"], threads=1)
    reader.read(plan[0])
    first = time.perf_counter() - began

    def timed_pass(batches_of_pass: list[np.ndarray]) -> tuple[float, float]:
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        began = time.perf_counter()
        for batch in batches_of_pass:
            reader.read(batch)
        elapsed = time.perf_counter() - began
        records = len(batches_of_pass) * BATCH
        faulted = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        return records / elapsed, faulted / records

    # The first pass maps the pages of the shards' chunks into the reader's
    # address space (a page fault for every few records at first); it is
    # reported, not counted as warm.
    first_pass, first_faults = timed_pass(plan[1 : 1 + batches])
    rates, faults = [], []
    for p in range(1, repeat + 1):
        rate, faulted = timed_pass(plan[1 + p * batches : 1 + (p + 1) * batches])
        rates.append(rate)
        faults.append(faulted)
    ours = statistics.median(rates)

    dataset = sds.open(root)
    dataset.__getitems__(plan[1][:8].tolist())  # its open and first footers, untimed as ours are
    began = time.perf_counter()
    for batch in plan[1 : 1 + sds_batches]:
        dataset.__getitems__(batch.tolist())
    theirs = sds_batches * BATCH / (time.perf_counter() - began)

    shards = reader.shards_indexed
    held = reader.index_bytes
    return {
        "records": count,
        "open_first_s": first,
        "first_pass": first_pass,
        "first_faults": first_faults,
        "rates": rates,
        "faults": statistics.median(faults),
        "ours": ours,
        "us_per_record": 1e6 / ours,
        "theirs": theirs,
        "ratio": ours / theirs,
        "shards_indexed": shards,
        "bytes_per_shard": held / max(shards, 1),
        "bytes_per_record": held / max(shards * PER_SHARD, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("cache_dir")
    parser.add_argument("--batches", type=int, default=200, help="batches of 256 a pass")
    parser.add_argument("--repeat", type=int, default=3, help="timed passes (median reported)")
    parser.add_argument("--sds-batches", type=int, default=8, help="batches signal_dataset reads")
    args = parser.parse_args()

    results = {}
    for shards in (4, 256):
        root = ensure(args.cache_dir, shards)
        results[shards] = measure(root, args.batches, args.repeat, args.sds_batches)
    for shards, row in results.items():
        print(
            f"{row['records']:>9,} records in {shards:>3} shards: "
            f"open + first batch {row['open_first_s']:.3f} s; "
            f"first pass {row['first_pass']:,.0f} rec/s ({row['first_faults']:.2f} page faults/record); "
            f"warm {row['ours']:,.0f} rec/s ({row['us_per_record']:.2f} us/record, "
            f"{row['faults']:.2f} faults/record; passes "
            + ", ".join(f"{rate:,.0f}" for rate in row["rates"])
            + f"); signal_dataset {row['theirs']:,.0f} rec/s, {row['ratio']:.1f}x; "
            f"{row['shards_indexed']} shards indexed, {row['bytes_per_shard']:,.0f} B a shard, "
            f"{row['bytes_per_record']:.1f} B a record"
        )
    small, large = results[4], results[256]
    print(f"per-record time, 256 shards / 4 shards: {large['us_per_record'] / small['us_per_record']:.2f}x")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB")


if __name__ == "__main__":
    main()
