"""One rank of the stats-reduction test; run under torchrun, gloo backend, CPU.

Usage: python -m torch.distributed.run --standalone --nproc_per_node=2 stats_rank_worker.py ROOT OUT_DIR

Rank r reads 4 * (r + 1) records through SDSTorchDataset, watched by
InputWatch, then reduces its stats and its wait over the ranks, and writes
what it got to OUT_DIR/rank-<r>.json.
"""

from __future__ import annotations

import json
import os
import sys

import torch.distributed as dist
from torch.utils.data import DataLoader

from sds_loader import InputWatch
from sds_loader.torch import SDSTorchDataset, all_reduce_stats, collate, gather_ranks


def main() -> None:
    root, out = sys.argv[1], sys.argv[2]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    dataset = SDSTorchDataset(root, threads=1)
    indices = list(range(4 * (rank + 1)))
    watch = InputWatch(DataLoader(dataset, sampler=indices, batch_size=2, collate_fn=collate), stats=dataset)
    for _ in watch:
        pass
    summed = all_reduce_stats(dataset.stats().total)
    report = gather_ranks(watch.report())
    with open(os.path.join(out, f"rank-{rank}.json"), "w", encoding="utf-8") as handle:
        json.dump(
            {
                "summed_records": summed.native_records,
                "summed_decompress": summed.stage_seconds["decompress"],
                "own_decompress": dataset.stats().total.stage_seconds["decompress"],
                "report_records": report.reads.native_records if report.reads else None,
                "ranks": [[r.rank, r.steps] for r in report.ranks],
                "diagnosis": report.diagnosis(),
            },
            handle,
        )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
