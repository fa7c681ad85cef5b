"""PyTorch map-style dataset over `BatchReader`, with a collate that copies nothing.

`SDSTorchDataset` is a drop-in for the adapter in signal_dataset's PyTorch
guide: ``dataset[i]`` returns the same keys, dtypes, shapes and values. What
changes is underneath. A DataLoader asks ``__getitems__`` for a whole batch of
indices, and that is one native read straight into the batch's final tensors,
returned as a `Batch`. `collate` hands those tensors on as they are; torch's
``default_collate`` still works on a `Batch` (it sees a sequence of samples)
and produces identical batches, at the cost of stacking them again.

Usage::

    from sds_loader.torch import SDSTorchDataset, collate

    dataset = SDSTorchDataset("captures.sds")
    loader = DataLoader(dataset, batch_size=256, shuffle=True,
                        num_workers=4, collate_fn=collate)
"""

from sds_loader.samplers import LengthBucketSampler, MixtureSampler, ShardAwareSampler
from sds_loader.torch.batch import Batch, collate
from sds_loader.torch.dataset import SDSTorchDataset
from sds_loader.torch.distributed_stats import all_reduce_stats, gather_ranks
from sds_loader.torch.mixture import Mixture
from sds_loader.torch.worker_stats import DatasetStats

__all__ = [
    "Batch",
    "DatasetStats",
    "LengthBucketSampler",
    "Mixture",
    "MixtureSampler",
    "SDSTorchDataset",
    "ShardAwareSampler",
    "all_reduce_stats",
    "collate",
    "gather_ranks",
]
