"""One rank of the elastic resume test; run under torchrun, gloo backend, CPU.

Usage: python -m torch.distributed.run --standalone --nproc_per_node=N \
           elastic_worker.py ROOT OUT_DIR save STOP_AFTER
       python -m torch.distributed.run --standalone --nproc_per_node=N \
           elastic_worker.py ROOT OUT_DIR resume WORKERS

Each rank reads its share of epoch 1 through SDSTorchDataset, a
`ShardAwareSampler` (which takes the world from torch.distributed) and
torchdata's StatefulDataLoader with one worker, checking every row against
signal_dataset's record. `save` stops after STOP_AFTER batches and writes
the loader's state to OUT_DIR/state-<rank>.pt and the ordinals it was
served to OUT_DIR/saved-<rank>.json. `resume`, on any number of ranks,
loads the state that old rank ``rank % saved ranks`` wrote (any rank's
would do: the ranks saved in lockstep), finishes the epoch with WORKERS
workers and writes OUT_DIR/resumed-<world>-<rank>.json. With one worker,
as saved, the loader loads its own state; with another number, the
sampler loads its state out of the loader's.
"""

from __future__ import annotations

import glob
import json
import os
import sys

import signal_dataset as sds
import torch
import torch.distributed as dist
from torchdata.stateful_dataloader import StatefulDataLoader

from sds_loader.samplers import sampler_state
from sds_loader.torch import SDSTorchDataset, ShardAwareSampler, collate

EPOCH = 1
BATCH = 4


def check_batch(batch: dict, reference: sds.Dataset) -> list[int]:
    """The batch's ordinals, after checking each row against signal_dataset's record."""
    indices = batch["index"].tolist()
    for row, index in enumerate(indices):
        record = reference[index]
        assert batch["target"][row].item() == record.metadata["label"]
        assert batch["inputs"][row].numpy().tobytes() == record["samples"].data.tobytes()
    return indices


def main(root: str, out_dir: str, phase: str, number: int) -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    dataset = SDSTorchDataset(root, targets={"index": "index"})
    sampler = ShardAwareSampler(dataset, seed=5, run_length=2, runs_mixed=2)
    workers = 1 if phase == "save" else number
    loader = StatefulDataLoader(
        dataset,
        batch_size=BATCH,
        sampler=sampler,
        collate_fn=collate,
        num_workers=workers,
        multiprocessing_context="fork",
    )
    reference = sds.open(root)
    sampler.set_epoch(EPOCH)
    served: list[int] = []
    if phase == "save":
        for batch in loader:
            served.extend(check_batch(batch, reference))
            if len(served) == number * BATCH:
                # Interrupted: what a checkpoint saves after this many steps.
                torch.save(loader.state_dict(), os.path.join(out_dir, f"state-{rank}.pt"))
                break
        name = f"saved-{rank}.json"
    else:
        saved = len(glob.glob(os.path.join(out_dir, "state-*.pt")))
        state = torch.load(os.path.join(out_dir, f"state-{rank % saved}.pt"), weights_only=False)
        if workers == 1:
            loader.load_state_dict(state)
        else:
            sampler.load_state_dict(sampler_state(state))
        served = [i for batch in loader for i in check_batch(batch, reference)]
        name = f"resumed-{world}-{rank}.json"
    dist.barrier()  # every rank finishes before any reports, as training steps would sync
    with open(os.path.join(out_dir, name), "w") as file:
        json.dump({"rank": rank, "world": world, "workers": workers, "order": served}, file)
    dist.destroy_process_group()


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
