"""Batches of records of similar length, so that padding to the longest wastes little.

Captures of different lengths batch together under a padded window
(``Window(axis, None, pad=True)`` pads each batch to its longest record), but
a random batch of lengths spread 1:10 is mostly padding: every row is as long
as the longest. `LengthBucketSampler` yields batches whose records are close
in length instead, while the epoch stays shuffled:

1. The epoch's ordinals are shuffled and cut into *pools* of
   ``batch_size * pool_batches`` records.
2. Each pool is sorted by length and cut into batches, so neighbours in
   length share a batch.
3. The batches of the whole epoch are shuffled, so long and short batches
   alternate rather than arriving in order.

`pool_batches` trades padding for mixing: a larger pool finds closer
neighbours (less padding) but makes a record's batch-mates more predictable
from its length; a pool of one batch is random batching. Ties in length are
broken by the shuffle, so records of one length still meet different
batch-mates every epoch.

Lengths come from each record's metadata (signal_dataset's
`FieldMetadata.shape`), read once when the sampler is made: the metadata
shards hold a few hundred bytes per record, and no tensor is read.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import signal_dataset as sds

from sds_loader.fallback import FallbackReader
from sds_loader.metadata import MetadataShards
from sds_loader.samplers.contract import EpochSampler, positive_int
from sds_loader.samplers.subsets import unwrap

#: Records whose metadata is read per request while the sampler learns lengths.
_LENGTHS_PER_READ = 4096


def record_lengths(dataset: object, axis: str) -> np.ndarray:
    """Every record's length along `axis`, from the dataset's record metadata."""
    uri = getattr(dataset, "uri", dataset)
    if not isinstance(uri, str | os.PathLike):
        raise TypeError(
            "LengthBucketSampler needs an SDSTorchDataset, a BatchReader or a dataset URI, "
            f"whose record metadata gives the lengths; got {type(dataset).__name__}"
        )
    uri = os.fspath(uri)
    opened = sds.open(uri)
    fallback = FallbackReader(uri, opened.object_store)
    try:
        source = MetadataShards(opened, fallback)
        count = len(opened)
        return np.concatenate(
            [
                source.lengths(np.arange(first, min(first + _LENGTHS_PER_READ, count)), axis)
                for first in range(0, count, _LENGTHS_PER_READ)
            ]
            or [np.zeros(0, dtype=np.int64)]
        )
    finally:
        fallback.close()


def padding_waste(batches: list[list[int]], lengths: np.ndarray) -> float:
    """The share of a padded epoch's positions that are padding, for `batches` of ordinals."""
    padded = sum(len(batch) * int(lengths[batch].max()) for batch in batches if batch)
    valid = sum(int(lengths[batch].sum()) for batch in batches)
    return 1.0 - valid / padded if padded else 0.0


class LengthBucketSampler(EpochSampler[list[int]]):
    """A batch sampler of records close in length along `axis`, for padded windows.

    ``DataLoader(dataset, batch_sampler=LengthBucketSampler(dataset, 64),
    collate_fn=collate)`` with ``SDSTorchDataset(uri, window=Window("time",
    None, pad=True))``. See this module's docstring for the order and
    `pool_batches`, and `sds_loader.samplers.contract` for determinism,
    `num_replicas`/`rank` partitions (whole batches, taken in turn),
    `set_epoch` and `state_dict()`/`load_state_dict()` resume, exact on the
    same world size and on another one every batch once, as it was formed.
    `drop_last` drops the epoch's last, short batch as well as the batches
    that would not divide evenly among ranks.
    """

    def __init__(
        self,
        dataset: object,
        batch_size: int,
        *,
        axis: str = "time",
        shuffle: bool = True,
        seed: int = 0,
        num_replicas: int | None = None,
        rank: int | None = None,
        drop_last: bool = False,
        pool_batches: int = 64,
    ) -> None:
        super().__init__(
            shuffle=shuffle, seed=seed, num_replicas=num_replicas, rank=rank, drop_last=drop_last
        )
        self.batch_size = positive_int("batch_size", batch_size)
        self.pool_batches = positive_int("pool_batches", pool_batches)
        if not isinstance(axis, str) or not axis:
            raise TypeError(f"axis must be a non-empty axis name, not {axis!r}")
        self.axis = axis
        base, ordinals = unwrap(dataset)
        lengths = record_lengths(base, axis)
        # A Subset's batches are lists of its positions, bucketed by their records' lengths.
        self._lengths = lengths if ordinals is None else lengths[ordinals]
        self._lengths.setflags(write=False)

    @property
    def lengths(self) -> np.ndarray:
        """Each record's length along `axis` (read-only), as the batches were formed from."""
        return self._lengths

    def _item_count(self) -> int:
        count = len(self._lengths)
        return count // self.batch_size if self.drop_last else -(-count // self.batch_size)

    def _layout(self) -> dict[str, Any]:
        return {
            **super()._layout(),
            "batch_size": self.batch_size,
            "pool_batches": self.pool_batches,
            "axis": self.axis,
        }

    def _epoch_items(self, rng: np.random.Generator | None) -> list[list[int]]:
        count = len(self._lengths)
        if rng is None:
            order = np.argsort(self._lengths, kind="stable")
        else:
            order = rng.permutation(count)
            pool = self.batch_size * self.pool_batches
            for first in range(0, count, pool):
                members = order[first : first + pool]
                order[first : first + pool] = members[np.argsort(self._lengths[members], kind="stable")]
        batches = [order[k : k + self.batch_size].tolist() for k in range(0, count, self.batch_size)]
        if self.drop_last and batches and len(batches[-1]) < self.batch_size:
            batches.pop()
        if rng is not None:
            batches = [batches[k] for k in rng.permutation(len(batches))]
        return batches

    def __repr__(self) -> str:
        return (
            f"{super().__repr__()[:-1]}, batch_size={self.batch_size}, axis={self.axis!r}, "
            f"pool_batches={self.pool_batches})"
        )
