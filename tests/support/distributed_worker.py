"""One rank of the distributed tests; run under torchrun, gloo backend, CPU.

Usage: python -m torch.distributed.run --standalone --nproc_per_node=2 \
           distributed_worker.py ROOT OUT_DIR EPOCHS [distributed|shard-aware] [STOP_AFTER]

Each rank reads its share of the dataset through SDSTorchDataset and writes the
ordinals it was served, per epoch, to OUT_DIR/rank-<r>.json for the test to check.

ROOT may be in object storage (s3://...): the rank then registers an S3
backend for the endpoint in $SDS_TEST_S3_ENDPOINT in signal_dataset's
default registry, as a training script configures its store, and takes
its credentials from the standard AWS variables.

With STOP_AFTER (a number of batches), the ranks read through torchdata's
StatefulDataLoader with a DataLoader worker: the last of the EPOCHS epochs
is interrupted after STOP_AFTER batches, and the loader's state is saved to
OUT_DIR/state-<r>.pt; run again with STOP_AFTER "resume", the ranks load
that state in new processes and finish that epoch, writing rank-<r>-resumed.json.
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


def register_endpoint() -> None:
    endpoint = os.environ.get("SDS_TEST_S3_ENDPOINT")
    if endpoint:
        from signal_dataset.storage import default_registry
        from signal_dataset.storage.backends.s3 import S3Options, s3_backend

        options = S3Options(endpoint_url=endpoint, region_name="us-east-1", addressing_style="path")
        default_registry().register(s3_backend(options), replace=True)


def check_batch(batch: dict, reference: sds.Dataset) -> list[int]:
    """The batch's ordinals, after checking each row against signal_dataset's record."""
    indices = batch["index"].tolist()
    for row, index in enumerate(indices):
        record = reference[index]
        assert batch["target"][row].item() == record.metadata["label"]
        assert batch["inputs"][row].numpy().tobytes() == record["samples"].data.tobytes()
    return indices


def main(root: str, out_dir: str, epochs: int, kind: str, stop: str | None) -> None:
    dist.init_process_group("gloo")
    register_endpoint()
    rank, world = dist.get_rank(), dist.get_world_size()
    dataset = SDSTorchDataset(root, targets={"index": "index"})
    # Neither sampler is told the rank: both take it from torch.distributed.
    if kind == "shard-aware":
        sampler = ShardAwareSampler(dataset, shuffle=True, seed=5, run_length=2, runs_mixed=2)
    else:
        sampler = DistributedSampler(dataset, shuffle=True, seed=5)
    loader: DataLoader
    if stop is None:
        loader = DataLoader(dataset, batch_size=4, sampler=sampler, collate_fn=collate)
    else:
        from torchdata.stateful_dataloader import StatefulDataLoader

        # A worker process reads, as in training; its state travels with the loader's.
        loader = StatefulDataLoader(
            dataset,
            batch_size=4,
            sampler=sampler,
            collate_fn=collate,
            num_workers=1,
            multiprocessing_context="fork",
        )
    reference = sds.open(root)
    state_path = os.path.join(out_dir, f"state-{rank}.pt")
    if stop == "resume":
        sampler.set_epoch(epochs - 1)
        loader.load_state_dict(torch.load(state_path, weights_only=False))  # type: ignore[attr-defined]
        order = [i for batch in loader for i in check_batch(batch, reference)]
        dist.barrier()
        with open(os.path.join(out_dir, f"rank-{rank}-resumed.json"), "w") as file:
            json.dump({"rank": rank, "world": world, "order": order}, file)
        dist.destroy_process_group()
        return
    served = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        order: list[int] = []
        last = stop is not None and epoch == epochs - 1
        for number, batch in enumerate(loader):
            order.extend(check_batch(batch, reference))
            if last and number + 1 == int(stop):  # type: ignore[arg-type]
                # Interrupted: what a checkpoint saves after this many steps.
                torch.save(loader.state_dict(), state_path)  # type: ignore[attr-defined]
                break
        served.append(order)
    # Every rank finishes its epochs before any reports, as training steps would sync.
    dist.barrier()
    with open(os.path.join(out_dir, f"rank-{rank}.json"), "w") as file:
        json.dump({"rank": rank, "world": world, "epochs": served}, file)
    dist.destroy_process_group()


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(
        sys.argv[1],
        sys.argv[2],
        int(sys.argv[3]),
        sys.argv[4] if len(sys.argv) > 4 else "distributed",
        sys.argv[5] if len(sys.argv) > 5 else None,
    )
