"""One rank of the DistributedSampler test; run under torchrun, gloo backend, CPU.

Usage: python -m torch.distributed.run --standalone --nproc_per_node=2 \
           distributed_worker.py ROOT OUT_DIR EPOCHS [distributed|shard-aware]

Each rank reads its share of the dataset through SDSTorchDataset and writes the
ordinals it was served, per epoch, to OUT_DIR/rank-<r>.json for the test to check.
"""

from __future__ import annotations

import json
import os
import sys

import signal_dataset as sds
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from sds_loader.torch import SDSTorchDataset, ShardAwareSampler, collate


def main(root: str, out_dir: str, epochs: int, kind: str) -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    dataset = SDSTorchDataset(root, targets={"index": "index"})
    # Neither sampler is told the rank: both take it from torch.distributed.
    if kind == "shard-aware":
        sampler = ShardAwareSampler(dataset, shuffle=True, seed=5, run_length=2, runs_mixed=2)
    else:
        sampler = DistributedSampler(dataset, shuffle=True, seed=5)
    loader = DataLoader(dataset, batch_size=4, sampler=sampler, collate_fn=collate)
    reference = sds.open(root)
    served = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        order: list[int] = []
        for batch in loader:
            indices = batch["index"].tolist()
            for row, index in enumerate(indices):
                record = reference[index]
                assert batch["target"][row].item() == record.metadata["label"]
                assert batch["inputs"][row].numpy().tobytes() == record["samples"].data.tobytes()
            order.extend(indices)
        served.append(order)
    # Every rank finishes its epochs before any reports, as training steps would sync.
    dist.barrier()
    with open(os.path.join(out_dir, f"rank-{rank}.json"), "w") as file:
        json.dump({"rank": rank, "world": world, "epochs": served}, file)
    dist.destroy_process_group()


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else "distributed")
