"""`torch.utils.data.Subset` of an SDS dataset, seen by a sampler as ordinals.

A split (``Subset(dataset, np.flatnonzero(cols["split"] == "train"))``) is
how most training code restricts a dataset. A sampler over a Subset yields
positions in the subset, while where a record lies, and how long it is, are
properties of its ordinal in the dataset underneath: this module turns one
into the other, through any nesting of Subsets.
"""

from __future__ import annotations

import numpy as np
from torch.utils.data import Subset


def unwrap(dataset: object) -> tuple[object, np.ndarray | None]:
    """(the dataset under any Subsets, the ordinal in it of each subset position, or None)."""
    ordinals: np.ndarray | None = None
    while isinstance(dataset, Subset):
        inner = np.asarray(dataset.indices, dtype=np.int64).reshape(-1)
        ordinals = inner if ordinals is None else inner[ordinals]
        dataset = dataset.dataset
    if ordinals is not None:
        try:
            count = len(dataset)  # type: ignore[arg-type]
        except TypeError:
            return dataset, ordinals
        bad = (ordinals < -count) | (ordinals >= count)
        if bad.any():
            raise IndexError(
                f"the Subset holds index {int(ordinals[np.argmax(bad)])}, outside the "
                f"{count} records of the dataset under it"
            )
        ordinals = np.where(ordinals < 0, ordinals + count, ordinals)
    return dataset, ordinals
