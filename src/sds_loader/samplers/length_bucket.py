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

With `boundaries` (a `sds_loader.Boundaries`, the same a padded `Window`
is given), records are first grouped by the smallest boundary that holds
them, in the epoch's shuffled order, and each group is pooled, sorted and
cut as above, so a batch's records share one boundary and the window pads
it to that boundary: an epoch's batches take at most one length per
boundary. Each group's last batch is short; `fill` makes it full (see
`sds_loader.samplers.filled_batches`), so that the batches take at most one
shape per boundary.

Lengths come from each record's metadata (signal_dataset's
`FieldMetadata.shape`), read once when the sampler is made: the metadata
shards hold a few hundred bytes per record, and no tensor is read.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import signal_dataset as sds

from sds_loader.boundaries import Boundaries, boundaries_setting
from sds_loader.fallback import FallbackReader
from sds_loader.metadata import MetadataShards
from sds_loader.samplers.contract import EpochSampler, positive_int
from sds_loader.samplers.filled_batches import fill_bucket, fill_setting, padding_batch
from sds_loader.samplers.subsets import unwrap
from sds_loader.windows import Window

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


def window_agrees(dataset: object, boundaries: Boundaries | None) -> None:
    """Refuse `boundaries` that are not those of `dataset`'s window, when both have some.

    The sampler puts records of one of its boundaries together and the window
    pads a batch to the smallest of its own that holds the longest row: with
    other lengths, rows are padded past their own boundary and an epoch takes
    other shapes than either names. A dataset given as a URI has no window.
    """
    window = getattr(dataset, "window", None)
    theirs = window.boundaries if isinstance(window, Window) else None
    if boundaries is None or theirs is None or theirs.lengths == boundaries.lengths:
        return
    raise ValueError(
        f"LengthBucketSampler boundaries={boundaries!r} differ from the window's, {theirs!r}: "
        "rows would be padded past their own boundary; give the sampler the window's "
        "(boundaries=dataset.window.boundaries)"
    )


def padding_waste(
    batches: list[list[int]], lengths: np.ndarray, boundaries: Boundaries | None = None
) -> float:
    """The share of a padded epoch's positions that are padding, for `batches` of ordinals.

    Each batch is as long as its longest record, or with `boundaries` as the
    boundary that holds it (records past the largest cut to it); the rows
    past a `FilledBatch`'s `valid` are padding whole.
    """
    padded = valid = 0
    for batch in batches:
        if not batch:
            continue
        rows = np.asarray(lengths)[list(batch)]
        longest = int(rows.max())
        if boundaries is not None:
            longest = boundaries.lengths[int(boundaries.buckets(np.asarray([longest]))[0])]
        counted = getattr(batch, "valid", len(batch))
        padded += len(batch) * longest
        valid += int(np.minimum(rows[:counted], longest).sum())
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

    `boundaries` buckets the records by boundary first (one short batch per
    boundary, each dropped by `drop_last`); give the window the same ones:
    other lengths than a dataset's window has are refused here, naming both.
    `fill` (``"mask"`` or ``"repeat"``) makes every short batch full, and
    under ``"mask"`` every whole batch a rank repeats is padding: see
    `sds_loader.samplers.filled_batches`. Under ``overflow="refuse"``, a
    record longer than the largest boundary is refused here, by ordinal.
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
        boundaries: Boundaries | Sequence[int] | None = None,
        fill: str | None = None,
    ) -> None:
        super().__init__(
            shuffle=shuffle, seed=seed, num_replicas=num_replicas, rank=rank, drop_last=drop_last
        )
        self.batch_size = positive_int("batch_size", batch_size)
        self.boundaries = boundaries_setting(boundaries, "LengthBucketSampler")
        self.fill = fill_setting(fill, self.drop_last)
        self.pool_batches = positive_int("pool_batches", pool_batches)
        if not isinstance(axis, str) or not axis:
            raise TypeError(f"axis must be a non-empty axis name, not {axis!r}")
        self.axis = axis
        base, ordinals = unwrap(dataset)
        if ordinals is not None and self.fill == "mask":
            # torch's Subset rebuilds each batch's indices as a plain list, so
            # the dataset under it would never see which rows are padding.
            raise ValueError(
                "fill='mask' marks padding rows in the indices it yields, and a torch Subset "
                "rebuilds them without the mark; over a Subset, use fill='repeat'"
            )
        window_agrees(base, self.boundaries)
        lengths = record_lengths(base, axis)
        # A Subset's batches are lists of its positions, bucketed by their records' lengths.
        self._lengths = lengths if ordinals is None else lengths[ordinals]
        self._lengths.setflags(write=False)
        # Each record's boundary (one bucket of everything without boundaries).
        self._buckets = np.zeros(len(self._lengths), dtype=np.int64)
        if self.boundaries is not None:
            positions = np.arange(len(self._lengths)) if ordinals is None else np.asarray(ordinals)
            self.boundaries.refuse_overflow(self._lengths, positions, axis)
            self._buckets = self.boundaries.buckets(self._lengths)
        self._bucket_sizes = np.bincount(self._buckets, minlength=1)

    @property
    def lengths(self) -> np.ndarray:
        """Each record's length along `axis` (read-only), as the batches were formed from."""
        return self._lengths

    def _item_count(self) -> int:
        sizes = self._bucket_sizes
        whole = sizes // self.batch_size
        return int(whole.sum() if self.drop_last else (-(-sizes // self.batch_size)).sum())

    def _layout(self) -> dict[str, Any]:
        layout = {
            **super()._layout(),
            "batch_size": self.batch_size,
            "pool_batches": self.pool_batches,
            "axis": self.axis,
        }
        # Only when set, so that a state saved before these knobs existed still loads.
        if self.boundaries is not None:
            layout["boundaries"] = list(self.boundaries.lengths)
            layout["overflow"] = self.boundaries.overflow
        if self.fill is not None:
            layout["fill"] = self.fill
        return layout

    def _epoch_items(self, rng: np.random.Generator | None) -> list[list[int]]:
        count = len(self._lengths)
        if rng is None:
            order = np.argsort(self._lengths, kind="stable")
        else:
            order = rng.permutation(count)
        batches: list[list[int]] = []
        for bucket in range(self._bucket_sizes.size):
            members = order if self.boundaries is None else order[self._buckets[order] == bucket]
            batches += self._bucket_batches(members, sort_pools=rng is not None)
        if rng is not None:
            batches = [batches[k] for k in rng.permutation(len(batches))]
        return batches

    def _bucket_batches(self, order: np.ndarray, *, sort_pools: bool) -> list[list[int]]:
        """One bucket's batches from its records in epoch order: pools sorted by length, then cut."""
        count = order.size
        if sort_pools:
            order = order.copy()
            pool = self.batch_size * self.pool_batches
            for first in range(0, count, pool):
                members = order[first : first + pool]
                order[first : first + pool] = members[np.argsort(self._lengths[members], kind="stable")]
        batches = [order[k : k + self.batch_size].tolist() for k in range(0, count, self.batch_size)]
        if self.drop_last and batches and len(batches[-1]) < self.batch_size:
            batches.pop()
        return fill_bucket(batches, order, self.batch_size, self.fill)

    def _padding_item(self, item: list[int]) -> list[int]:
        return padding_batch(item, self.fill)

    def __repr__(self) -> str:
        return (
            f"{super().__repr__()[:-1]}, batch_size={self.batch_size}, axis={self.axis!r}, "
            f"pool_batches={self.pool_batches}"
            + (f", boundaries={self.boundaries!r}" if self.boundaries is not None else "")
            + (f", fill={self.fill!r}" if self.fill is not None else "")
            + ")"
        )
