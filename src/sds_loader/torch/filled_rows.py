"""The padding rows of a batch a sampler filled to full size: zeroed, and marked by ``valid``.

A batch sampler with ``fill="mask"`` yields `FilledBatch` indices whose rows
past `valid` are padding, copies of the batch's own records so that the
batch keeps its length along a padded window. `SDSTorchDataset` reads them
with the rest in its one native read, then hands the batch here. Their
``ordinal`` extra becomes -1 rather than 0, so that code counting ordinals
without the mask does not count record 0 once per padding row.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch as _torch

from sds_loader.samplers.filled_batches import VALID_KEY, FilledBatch
from sds_loader.torch.batch import Batch, stacked_and_ragged, with_stacked

#: The ordinal a padding row carries: no record has it.
PADDING_ORDINAL = -1


def mask_padding_rows(batch: Batch, indices: Sequence[int] | object, ordinal_key: str | None = None) -> Batch:
    """`batch` with its padding rows zeroed (their lengths 0) and the ``valid`` key added.

    `ordinal_key` names the batch's ``ordinal`` extra, if it has one: its
    padding rows get `PADDING_ORDINAL`. A batch read from plain indices is
    returned as it is.
    """
    if not isinstance(indices, FilledBatch):
        return batch
    tensors, ragged = stacked_and_ragged(batch)
    if VALID_KEY in tensors or VALID_KEY in ragged:
        raise ValueError(
            f"a batch filled to full size carries the key {VALID_KEY!r}, which this dataset's outputs "
            "already name; rename that output, or use a sampler without fill='mask'"
        )
    valid = indices.valid
    for tensor in tensors.values():
        tensor[valid:] = 0
    if ordinal_key is not None:
        tensors[ordinal_key][valid:] = PADDING_ORDINAL
    mask = _torch.arange(len(batch)) < valid
    return with_stacked(batch, {**tensors, VALID_KEY: mask})
