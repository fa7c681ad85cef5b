"""One rank of the augmentation's two-rank test, run in a process of its own (tests/augment)."""

from __future__ import annotations

import numpy as np


def rank_rows(root: str, chain: object, rank: int, epoch: int) -> dict[int, dict[str, bytes]]:
    """What rank `rank` of two reads in `epoch` through a DataLoader: each row's keys as bytes, by ordinal."""
    from torch.utils.data import DataLoader

    from sds_loader.torch import SDSTorchDataset, ShardAwareSampler, collate

    dataset = SDSTorchDataset(root, target="label", extras=("ordinal",), augment=chain, seed=7)
    sampler = ShardAwareSampler(dataset, seed=3, num_replicas=2, rank=rank, run_length=4)
    sampler.set_epoch(epoch)
    dataset.set_epoch(epoch)
    rows: dict[int, dict[str, bytes]] = {}
    for batch in DataLoader(dataset, batch_size=4, sampler=sampler, collate_fn=collate):
        for k, ordinal in enumerate(batch["ordinal"].tolist()):
            rows[int(ordinal)] = {key: np.asarray(value[k]).tobytes() for key, value in batch.items()}
    return rows
