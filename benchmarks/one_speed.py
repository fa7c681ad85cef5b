"""One speed: the same read in fresh processes and in fresh readers, each against the machine's pace.

A reader's rate alone says as much about the machine at that moment as about
the reader: on a shared host a neighbour can halve it. So each read is set
against a reference taken in the same process around it (before and after,
the mean): the same records' zstd frames decompressed alone, by the bench's
own bound (`bound_decompress`, one core, into rows). A noisy neighbour slows
both; a reader that is slow of itself moves only the ratio.

Two halves, for each dataset given:

- **processes**: PROCESSES fresh interpreters, one after another, each
  opening a reader, reading a seeded shuffled pass untimed (its shards
  opened), then the same pass timed, with its reference;
- **readers**: READERS fresh readers made one after another in this process,
  each the same way.

The spread is the largest ratio over the smallest, in each half. The page
cache is warm (every shard read once first) and every read uses one thread.

Usage: python benchmarks/one_speed.py ROOT [ROOT...] [--processes 10] [--readers 10]
           [--batch-size 256] [--records 8192]
Without ROOT, the bench's built-in zstd variants (1 KiB, 8 KiB and 64 KiB
records), written to its cache directory if they are not there.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import numpy as np
import signal_dataset as sds

import sds_loader
from sds_loader.cli import native_tools
from sds_loader.cli.bench.bounds import batch_payloads
from sds_loader.dataset import shard_table


def batches_of(count: int, records: int, batch_size: int) -> list[np.ndarray]:
    order = np.random.default_rng(0).permutation(count)[: min(records, count)]
    return [order[k : k + batch_size] for k in range(0, order.size, batch_size)]


class Reference:
    """The same records' frames, decompressed alone: the machine's pace for this work, now."""

    def __init__(self, root: str, batches: list[np.ndarray]) -> None:
        payloads = native_tools.function("chunk_payloads")
        self.decompress = native_tools.function("bound_decompress")
        table = shard_table(sds.open(root))
        self.items = [item for batch in batches for item in batch_payloads(table, payloads, batch)]
        self.records = sum(batch.size for batch in batches)
        self.rows = max(batch.size for batch in batches)

    def rate(self) -> float:
        seconds = float(self.decompress(self.items, 1, self.rows))
        return self.records / seconds


def one_read(root: str, batches: list[np.ndarray], reference: Reference) -> dict[str, float]:
    """A fresh reader's timed pass, between two references."""
    before = reference.rate()
    reader = sds_loader.BatchReader(root, threads=1)
    for batch in batches:
        reader.read(batch)  # untimed: every shard of the pass opened, as for the rest of its life
    started = time.perf_counter()
    for batch in batches:
        reader.read(batch)
    rate = sum(batch.size for batch in batches) / (time.perf_counter() - started)
    after = reference.rate()
    reader.close()
    pace = (before + after) / 2
    return {"rate": rate, "reference": pace, "ratio": rate / pace}


def child(root: str, records: int, batch_size: int) -> None:
    count = len(sds.open(root))
    batches = batches_of(count, records, batch_size)
    print(json.dumps(one_read(root, batches, Reference(root, batches))))


def spread(runs: list[dict[str, float]]) -> str:
    ratios = [run["ratio"] for run in runs]
    rates = [run["rate"] for run in runs]
    return (
        f"ratio median {statistics.median(ratios):.3f}  spread {max(ratios) / min(ratios):.2f}   "
        f"records/s median {statistics.median(rates):,.0f}  spread {max(rates) / min(rates):.2f}"
    )


def measure(root: str, args: argparse.Namespace) -> None:
    count = len(sds.open(root))
    batches = batches_of(count, args.records, args.batch_size)
    reference = Reference(root, batches)
    warm = sds_loader.BatchReader(root, threads=1)
    for batch in batches_of(count, count, args.batch_size):
        warm.read(batch)  # every shard in the page cache
    warm.close()
    processes = []
    for _ in range(args.processes):
        line = (
            subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    root,
                    "--records",
                    str(args.records),
                    "--batch-size",
                    str(args.batch_size),
                ],
                check=True,
                capture_output=True,
                text=True,
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        processes.append(json.loads(line))
    readers = [one_read(root, batches, reference) for _ in range(args.readers)]
    print(f"{root}: {sum(b.size for b in batches)} records a pass, batches of {args.batch_size}, 1 thread")
    for name, runs in (("processes", processes), ("readers", readers)):
        print(f"  {args.processes if name == 'processes' else args.readers:>3} {name:<9} {spread(runs)}")
        print("      ratios " + " ".join(f"{run['ratio']:.3f}" for run in runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="*")
    parser.add_argument("--processes", type=int, default=10)
    parser.add_argument("--readers", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--records", type=int, default=8192, help="records a timed pass reads at most")
    parser.add_argument("--child", metavar="ROOT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.records, args.batch_size)
        return
    roots = args.roots
    if not roots:
        from sds_loader.cli.bench import builtin

        variants = ("short-zstd", "frames-zstd", "zstd")
        roots = list(builtin.ensure(variants=variants, progress=False).values())
    for root in roots:
        measure(root, args)


if __name__ == "__main__":
    main()
