"""A full pass through Ray Data: `read_sds` against BatchReader alone and the usual workaround.

``sds-loader bench --ray`` (or ``python -m sds_loader.cli.bench.ray_pass``)
starts Ray on this machine with one logical CPU per `--threads`, and times a
full pass over the built-in zstd captures (16,384 of 2x4096 complex64 by
default, 64 KiB each, about 1 GiB, so that Ray's fixed cost per pass is not
the whole figure), in batches of `--batch-size`, three ways:

- ``BatchReader(threads=T)`` alone, in this process: what the native reader
  does without Ray, the ceiling of the rows below;
- ``read_sds(...).iter_batches(batch_size=B)``: read tasks over stretches of
  shards, decoded in Ray's workers, their blocks through Ray's object store
  into the driver;
- ``ray.data.range(n).map_batches(...)`` reading each record through
  signal_dataset: what an SDS user writes today without a datasource. Given
  as many blocks as `read_sds` makes, so that it pays Ray's cost per task no
  more often.

Every method has an untimed warm-up pass (Ray starts its workers, the pages
are cached), then `--passes` timed rounds, each timing every method once in
turn, so that a shared machine busier one minute than the next slows every
row alike; the median is kept. Also reported: how far the driver's own
memory rose during the `read_sds` passes (anonymous resident pages: the
object store's shared pages it maps as it iterates are the store's), and how
many bytes its plan (every read task, pickled) takes: a few per shard, none
per record, and the load average as the passes began and ended.
"""

from __future__ import annotations

import argparse
import functools
import os
import pickle
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import signal_dataset as sds

from sds_loader import BatchReader
from sds_loader.cli.bench import builtin

RECORDS = 16384
BATCH = 256

#: This process's signal_dataset datasets by root: a Ray worker opens each once.
_OPENED: dict[str, sds.Dataset] = {}


def signal_dataset_batch(batch: dict[str, np.ndarray], root: str) -> dict[str, np.ndarray]:
    """map_batches' function: each id of `ray.data.range` read as a record through signal_dataset."""
    dataset = _OPENED.get(root)
    if dataset is None:
        dataset = _OPENED[root] = sds.open(root)
    records = [dataset[int(ordinal)] for ordinal in batch["id"].tolist()]
    samples = np.stack([record["samples"].data for record in records])
    return {
        # Ray holds no complex tensor: the float view, as read_sds delivers it.
        "samples": samples.view(samples.real.dtype).reshape(*samples.shape, 2),
        "label": np.asarray([record.metadata["label"] for record in records], dtype=np.int64),
        "ordinal": batch["id"],
    }


def batch_reader_pass(root: str, threads: int, batch: int) -> Callable[[], int]:
    reader = BatchReader(root, fields=["samples"], targets=["label"], threads=threads)
    count = len(reader)

    def one_pass() -> int:
        for first in range(0, count, batch):
            reader.read(np.arange(first, min(first + batch, count)))
        return count

    return one_pass


def ray_pass(dataset: Any, batch: int, memory: list[int] | None = None) -> Callable[[], int]:
    """A pass through `dataset` in batches; with `memory`, how far the driver's own memory
    has risen since the pass began, at each batch."""

    def one_pass() -> int:
        rows = 0
        began = resident_bytes()
        for part in dataset.iter_batches(batch_size=batch):
            rows += len(part["ordinal"])
            if memory is not None:
                memory.append(resident_bytes() - began)
        return rows

    return one_pass


def median_rates(passes: dict[str, Callable[[], int]], times: int, expected: int) -> dict[str, float]:
    """Records per second of each pass, the median of `times` timed rounds after an untimed one.

    A round times every pass once, in turn, so that a machine busier in one
    minute than the next slows every row alike.
    """
    for one_pass in passes.values():
        one_pass()
    rates: dict[str, list[float]] = {label: [] for label in passes}
    for _ in range(times):
        for label, one_pass in passes.items():
            start = time.perf_counter()
            rows = one_pass()
            rates[label].append(rows / (time.perf_counter() - start))
            if rows != expected:
                raise RuntimeError(f"{label}: a pass read {rows} records of {expected}")
    return {label: statistics.median(values) for label, values in rates.items()}


def resident_bytes() -> int:
    """This process's own resident memory now: anonymous pages, not the object store's shared ones.

    The driver maps each block from the object store's shared memory as it
    iterates, and those pages count in its resident size while the mapping
    lasts, though they are the store's (bounded by its size), not the driver's.
    """
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=RECORDS, help="captures of the built-in zstd dataset")
    parser.add_argument("--passes", type=int, default=3, help="timed passes per row (median kept)")
    parser.add_argument("--threads", type=int, default=2, help="BatchReader's threads, and Ray's CPUs")
    parser.add_argument("--batch-size", type=int, default=BATCH)
    parser.add_argument("--cache-dir", default=None, help="where the built-in dataset is cached")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar while writing")
    args = parser.parse_args(argv)
    try:
        import ray
        import ray.data

        from sds_loader.ray import SDSDatasource, read_sds
    except ImportError:
        print("bench --ray needs Ray Data: pip install 'sds-loader[ray]'", file=sys.stderr)
        return 2
    root = builtin.ensure(
        args.records, progress=not args.no_progress, directory=args.cache_dir, variants=("zstd",)
    )["zstd"]
    count = len(sds.open(root))
    record_bytes = builtin.CHANNELS * builtin.SAMPLES * np.dtype(np.complex64).itemsize
    print(
        f"{builtin.describe('zstd', root)}; a full pass in batches of {args.batch_size}, "
        f"{args.threads} thread(s) and as many Ray CPUs, median of {args.passes} warm rounds "
        "(a round times each row once, in turn)",
        flush=True,
    )
    # A Ray this process already runs (a test's, a notebook's) is used as it is.
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=args.threads, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        # The plan read_sds makes: as many tasks as it chooses for this many CPUs.
        source = SDSDatasource(root, fields=["samples"], targets=["label"])
        blocks = source.default_num_blocks(int(ray.cluster_resources().get("CPU", 1)))  # type: ignore[no-untyped-call]
        plan_bytes = len(pickle.dumps(source.get_read_tasks(blocks)))
        memory: list[int] = []
        alone = f"BatchReader(threads={args.threads})"
        native = f"read_sds(...).iter_batches(batch_size={args.batch_size})"
        baseline = "ray.data.range(n).map_batches(signal_dataset)"
        workaround = ray.data.range(count, override_num_blocks=blocks).map_batches(
            functools.partial(signal_dataset_batch, root=root), batch_size=args.batch_size
        )
        began_load = os.getloadavg()[0]
        rates = median_rates(
            {
                alone: batch_reader_pass(root, args.threads, args.batch_size),
                native: ray_pass(
                    read_sds(root, fields=["samples"], targets=["label"]), args.batch_size, memory
                ),
                baseline: ray_pass(workaround, args.batch_size),
            },
            args.passes,
            count,
        )
    finally:
        if started:
            ray.shutdown()
    for label, rate in rates.items():
        print(f"{label:58} {rate:10,.0f} rec/s {rate * record_bytes / 1e6:8,.0f} MB/s")
    print()
    print(
        f"read_sds: {rates[native] / rates[alone]:.2f}x BatchReader alone, "
        f"{rates[native] / rates[baseline]:.1f}x range + map_batches"
    )
    # The rows share the machine with whatever else runs on it: their ratios say more than their rates.
    print(
        f"load average (1 min): {began_load:.2f} as the passes began, {os.getloadavg()[0]:.2f} at their end"
    )
    print(
        f"driver: its own memory (RssAnon) at most +{max(memory) / 2**20:,.0f} MiB during the "
        f"read_sds passes; its plan ({blocks} read tasks, pickled) {plan_bytes:,} bytes for {count:,} records"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
