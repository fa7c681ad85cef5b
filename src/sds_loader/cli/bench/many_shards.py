"""Open a dataset of many shards: the reader, its first batch, and DataLoader workers, against signal_dataset.

    sds-loader bench --shards 10000 [--cache-dir DIR]
    python -m sds_loader.cli.bench.many_shards ROOT --shards 10000 [--repeat 3]

Writes ROOT (by default `many-shards-N` under the bench's cache directory)
once, kept for later runs: `--shards` shards of 16 records of
1 KiB int16 captures, published with signal_dataset's `publish`. Writing
100,000 shards with signal_dataset's writer takes over half an hour, so a
few shards are written with it and the rest are hard links to them under
names of their own, in signal_dataset's layout (the records repeat; every
shard is a shard signal_dataset's writer wrote). Then, each step in a fresh
interpreter so that nothing is warm but the page cache, and each `--repeat`
times (the median is printed, with the range):

- `signal_dataset.open(root)` and `len`;
- `BatchReader(root)`, and its first batch of 256 random records;
- a `DataLoader(SDSTorchDataset(root), num_workers=2)`: its first batch after
  the dataset was made, with fork and with spawn, beside what spawning two
  workers that import torch costs by itself (a dataset of nothing);
- whether a worker read a manifest page, and what the reader keeps per shard
  (its table and its native set, by their own count; the resident size's
  growth from one shard count to another is the whole of it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import signal_dataset as sds

RECORDS_PER_SHARD = 16
SAMPLES = 512  # int16: 1 KiB a record
WRITTEN = 16  # shards written by signal_dataset's writer; the rest link to them


def capture(ordinal: int) -> sds.Record:
    """Record `ordinal` of the dataset: 1 KiB of int16 samples, seeded by the ordinal, and a label."""
    import numpy as np
    import signal_dataset as sds

    samples = np.random.default_rng(ordinal).integers(-2000, 2000, SAMPLES, dtype=np.int16)
    return sds.Record(
        id=f"capture-{ordinal:09d}",
        fields={"samples": sds.Field(samples, axes=(sds.Axis("time", SAMPLES),))},
        metadata={"label": ordinal % 4},
    )


def write(root: Path, shards: int) -> None:
    import signal_dataset as sds

    written = [
        sds.write_shard(
            (capture(s * RECORDS_PER_SHARD + k) for k in range(RECORDS_PER_SHARD)),
            str(root),
            work_id=f"w{s:07d}",
        )
        for s in range(min(WRITTEN, shards))
    ]
    published = list(written)
    for s in range(len(written), shards):
        source = written[s % len(written)]
        digest = hashlib.sha256(f"link-{s}".encode()).hexdigest()
        paths = {}
        for kind, uri in (("data", source.data_uri), ("metadata", source.metadata_uri)):
            target = root / "objects" / kind / digest[:2] / f"{digest}.arrayrecord"
            target.parent.mkdir(parents=True, exist_ok=True)
            os.link(uri, target)
            paths[kind] = str(target)
        published.append(
            sds.PublishedShard(
                data_uri=paths["data"],
                metadata_uri=paths["metadata"],
                work_id=f"l{s:07d}",
                attempt=0,
                record_count=source.record_count,
                data_bytes=source.data_bytes,
                metadata_bytes=source.metadata_bytes,
                data_generation=None,
                metadata_generation=None,
            )
        )
    sds.publish(str(root), published, dataset_id="many-shards", snapshot_id="v1")


STEP = r"""
import json, os, sys, time
step, root = sys.argv[1], sys.argv[2]
out = {}
if step == "signal_dataset":
    import signal_dataset as sds
    started = time.perf_counter()
    n = len(sds.open(root))
    out["open"] = time.perf_counter() - started
elif step == "reader":
    import numpy as np, tracemalloc
    import sds_loader
    started = time.perf_counter()
    reader = sds_loader.BatchReader(root, threads=1)
    out["open"] = time.perf_counter() - started
    # A copy: a slice would keep the permutation of every record alive, 8
    # bytes a record counted in the resident size as if the reader kept them.
    order = np.random.default_rng(0).permutation(len(reader))[:256].copy()
    reader.read(order)
    out["open_and_first_batch"] = time.perf_counter() - started
    # Resident memory after the first batch: its growth between two datasets
    # of different shard counts is what the reader keeps per shard. What was
    # freed (the parsed manifest pages) is handed back to the system first,
    # so that what is counted is what is kept.
    import ctypes, gc
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/statm") as statm:
        out["resident_mb"] = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6
    # What the reader keeps for every shard, touched or not, by its own count:
    # the table it addresses records with, and the native set's names and slots.
    state = reader.process_state()
    shards = len(state.table.paths)
    out["table_bytes_per_shard"] = state.table.held_bytes / shards
    out["set_bytes_per_shard"] = state.native.held_bytes / shards
    out["shards"] = shards
else:
    import torch
    from torch.utils.data import DataLoader, TensorDataset
    context = step.split("-")[1]
    if step.startswith("empty"):
        dataset = TensorDataset(torch.zeros(512, 1))
        loader = DataLoader(dataset, batch_size=256, num_workers=2, multiprocessing_context=context)
    else:
        from sds_loader.torch import SDSTorchDataset, collate
        dataset = SDSTorchDataset(root, threads=1)
        loader = DataLoader(dataset, batch_size=256, shuffle=True, num_workers=2,
                            multiprocessing_context=context, collate_fn=collate)
    started = time.perf_counter()
    next(iter(loader))
    out["first_batch"] = time.perf_counter() - started
print(json.dumps(out))
"""


def step(name: str, root: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", STEP, name, str(root)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"{name} failed:\n{done.stderr}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(options: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("root", type=Path, help="where the dataset is (written there if missing)")
    parser.add_argument("--shards", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-workers", action="store_true", help="skip the DataLoader rows")
    args = parser.parse_args(options)
    if not (args.root / "root.json").exists():
        started = time.perf_counter()
        write(args.root, args.shards)
        print(f"wrote {args.shards} shards to {args.root} in {time.perf_counter() - started:.1f} s")
    steps = ["signal_dataset", "reader"]
    if not args.no_workers:
        steps += ["sds-fork", "sds-spawn", "empty-spawn"]
    results: dict[str, list[dict[str, float]]] = {name: [] for name in steps}
    for _ in range(args.repeat):
        for name in steps:
            results[name].append(step(name, args.root))
    print(f"{'step':<46} {'median':>9} {'range':>19}")
    for name, runs in results.items():
        for key in runs[0]:
            values = [r[key] for r in runs]
            unit = " s" if key in ("open", "open_and_first_batch", "first_batch") else ""
            print(
                f"{name + ' ' + key:<46} {statistics.median(values):>9.3f}{unit:2} "
                f"{min(values):>8.3f}-{max(values):<8.3f}"
            )

    return 0


if __name__ == "__main__":
    raise SystemExit(main())
