"""Samplers for DataLoaders over SDS datasets, all under one contract.

`EpochSampler` is that contract (one order per seed and epoch, equal
partitions across ranks, resume on the same world size or another);
`ShardAwareSampler` is its IO-locality-aware shuffle; `LengthBucketSampler` batches records of similar
length for padded windows; `MixtureSampler` batches a weighted `Mixture` of
datasets, each member in proportion in every batch. `sampler_state` takes a
sampler's state out of a ``StatefulDataLoader``'s, to resume with another
number of workers.
"""

from sds_loader.samplers.contract import EpochSampler
from sds_loader.samplers.length_bucket import LengthBucketSampler
from sds_loader.samplers.loader_state import sampler_state
from sds_loader.samplers.mixture_sampler import MixtureSampler
from sds_loader.samplers.shard_aware import ShardAwareSampler

__all__ = ["EpochSampler", "LengthBucketSampler", "MixtureSampler", "ShardAwareSampler", "sampler_state"]
