"""Batches filled to the full batch size, so that a static batch dimension sees one size.

A CUDA graph or a step compiled for static shapes needs every batch of the
same size, and an epoch's last batch is short unless ``drop_last`` drops
its records. A batch sampler's ``fill`` makes every batch full instead:

- ``"mask"``: a short batch is filled with padding rows, yielded as a
  `FilledBatch` whose first `valid` entries are its records. The dataset
  (`SDSTorchDataset`) reads the padding rows as copies of the batch's own
  records (so the batch keeps its length along a padded window), zeroes
  them, gives them a ``<field>_length`` of 0 and an ``ordinal`` extra of
  -1 (docs/windows.md lists every extra's value), and adds the ``valid`` key:
  True for the batch's records, False for padding. Every batch of such a
  sampler is a `FilledBatch`, so every batch has the key. Whole batches a
  rank repeats so that every rank runs as many steps are all padding, so
  every record counts exactly once across ranks.
- ``"repeat"``: a short batch takes records again, as torch's
  ``DistributedSampler`` repeats records to even out ranks: the records
  that come just before it in its bucket's order, which for
  `LengthBucketSampler` are its neighbours in length. No key is added; the
  repeated records are counted twice.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: The ways a short batch is made full.
FILLS = ("mask", "repeat")

#: The key `SDSTorchDataset` adds to a batch read from a `FilledBatch`.
VALID_KEY = "valid"


class FilledBatch(list[int]):
    """A batch's ordinals, its first `valid` the batch's records and the rest padding rows.

    A list, so a DataLoader hands it to the dataset's ``__getitems__`` as it
    would any batch of indices, in its workers too (it pickles with
    `valid`); the padding rows repeat the batch's own records.
    """

    __slots__ = ("valid",)

    def __init__(self, ordinals: Sequence[int], valid: int) -> None:
        super().__init__(ordinals)
        if not 0 <= valid <= len(self):
            raise ValueError(f"a FilledBatch of {len(self)} rows has 0 to {len(self)} valid, not {valid}")
        self.valid = int(valid)

    def __reduce__(self) -> tuple[object, ...]:
        return FilledBatch, (list(self), self.valid)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FilledBatch):
            return self.valid == other.valid and list.__eq__(self, other)
        return list.__eq__(self, other)

    __hash__ = None  # a list, mutable

    def __repr__(self) -> str:
        return f"FilledBatch({list(self)!r}, valid={self.valid})"


def fill_setting(fill: object, drop_last: bool) -> str | None:
    """`fill` checked against `FILLS`; it cannot go with `drop_last`, which drops what it fills."""
    if fill is None:
        return None
    if fill not in FILLS:
        raise ValueError(f"fill must be None or one of {FILLS}, not {fill!r}")
    if drop_last:
        raise ValueError(
            f"fill={fill!r} fills the short batches that drop_last=True drops; pass one of the two"
        )
    return str(fill)


def fill_bucket(
    batches: list[list[int]], order: np.ndarray, batch_size: int, fill: str | None
) -> list[list[int]]:
    """One bucket's `batches`, cut from `order` in turn, with its short last batch made full by `fill`."""
    if fill is None or not batches:
        return batches
    last = batches[-1]
    short = batch_size - len(last)
    if fill == "mask":
        cycled = [last[k % len(last)] for k in range(short)]
        full = [FilledBatch(batch, len(batch)) for batch in batches[:-1]]
        return [*full, FilledBatch(last + cycled, len(last))]
    if short == 0:
        return batches
    # The records just before the short batch in the bucket's order, cycling
    # over the bucket when it holds fewer than a batch.
    before = order[: order.size - len(last)].tolist() or last
    taken = before[-short:] if len(before) >= short else [before[k % len(before)] for k in range(short)]
    return [*batches[:-1], taken + last]


def padding_batch(batch: list[int], fill: str | None) -> list[int]:
    """The batch a rank repeats to even out the ranks' steps: all padding under ``"mask"``."""
    if fill == "mask":
        return FilledBatch(batch, 0)
    return batch
