"""One rank of the per-rank diagnosis test; run under torchrun, gloo backend, CPU.

Usage: python -m torch.distributed.run --standalone --nproc_per_node=2 input_rank_worker.py ROOT OUT_DIR

The two ranks read the same dataset (large zstd records) with two different
input layouts. Rank 0 reads three quarters of it in two DataLoader workers
behind a model step of 50 ms, which they keep well ahead of: it does not
wait. Rank 1 reads the last quarter in its own process (no workers), four
records a batch, with no model step at all: every step is a read, so it
waits most of its time whatever the machine's load.
Rank 0 reads three times the bytes rank 1 does, so the job's reads summed
are mostly rank 0's workers'. Each rank gathers the report and writes its
diagnosis, its own wait and its own stage seconds to OUT_DIR/rank-<r>.json.
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch.distributed as dist
from torch.utils.data import DataLoader

from sds_loader import InputWatch
from sds_loader.torch import SDSTorchDataset, collate, gather_ranks

RECORDS = 128


def main() -> None:
    root, out = sys.argv[1], sys.argv[2]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    dataset = SDSTorchDataset(root, threads=1, verify_checksums=False)
    split = 3 * RECORDS // 4
    if rank == 0:
        loader = DataLoader(dataset, batch_size=8, sampler=range(split), num_workers=2, collate_fn=collate)
        step = 0.05
    else:
        loader = DataLoader(dataset, batch_size=4, sampler=range(split, RECORDS), collate_fn=collate)
        step = 0.0
    watch = InputWatch(loader, stats=dataset)
    for _ in watch:
        if step:  # no call at all on rank 1: even a sleep of 0 gives the core away
            time.sleep(step)
    own = watch.report()
    report = gather_ranks(own)
    with open(os.path.join(out, f"rank-{rank}.json"), "w", encoding="utf-8") as handle:
        json.dump(
            {
                "wait_share": own.wait_share,
                "stage_seconds": own.reads.stage_seconds if own.reads else None,
                "worker_seconds": sum(own.worker_reads.stage_seconds.values()) if own.worker_reads else None,
                "diagnosis": report.diagnosis(),
            },
            handle,
        )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
