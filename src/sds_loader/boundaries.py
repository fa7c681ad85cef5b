"""Boundaries: the few lengths a padded batch may take, so that a compiled model sees few shapes.

A model compiled for static shapes (``torch.compile(dynamic=False)``, CUDA
graphs, XLA) compiles or captures once per input shape. Padding each batch
to its longest record gives about one shape per batch; padding every batch
to the longest record of the dataset gives one shape and wastes most of the
compute. `Boundaries` is the middle way: a batch is padded to the smallest
boundary that holds its longest record, so an epoch takes at most one
length per boundary, and `LengthBucketSampler` given the same boundaries
batches records of one boundary together, so no row is padded past the
boundary of its own record.

A record longer than the largest boundary is the `overflow` policy's:

- ``"cut"`` (the default): its row keeps the largest boundary's positions,
  placed by the window's crop (``"start"``: the first ones; ``"center"``,
  ``"random"`` as for a fixed window), and ``<field>_length`` says so;
- ``"refuse"``: reading a batch that holds it raises ValueError, and so
  does making a `LengthBucketSampler` over such a dataset; the error says
  how many records are too long and names the first few.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

#: What becomes of a record longer than the largest boundary.
OVERFLOWS = ("cut", "refuse")

#: How many of the records past the largest boundary a refusal names.
_NAMED_OVERFLOWS = 5


@dataclass(frozen=True, slots=True)
class Boundaries:
    """Increasing lengths a padded batch may take; see this module's docstring.

    ``Boundaries((256, 512, 1024, 2048))`` or
    ``Boundaries.powers_of_two(256, 2048)``, the same four.
    """

    lengths: tuple[int, ...]
    overflow: str = "cut"

    def __init__(self, lengths: Iterable[int], *, overflow: str = "cut") -> None:
        if isinstance(lengths, str | bytes) or not isinstance(lengths, Iterable):
            raise TypeError(f"Boundaries takes a sequence of lengths, not {type(lengths).__name__}")
        values = list(lengths)
        if not values:
            raise ValueError("Boundaries needs at least one length")
        for value in values:
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"Boundaries lengths must be positive integers, not {value!r}")
        checked = tuple(int(value) for value in values)
        if any(b <= a for a, b in zip(checked, checked[1:], strict=False)):
            raise ValueError(
                f"Boundaries lengths must increase strictly, as in (256, 512, 1024); got {checked}"
            )
        if overflow not in OVERFLOWS:
            raise ValueError(f"Boundaries overflow must be one of {OVERFLOWS}, not {overflow!r}")
        object.__setattr__(self, "lengths", checked)
        object.__setattr__(self, "overflow", overflow)

    @classmethod
    def powers_of_two(cls, smallest: int, largest: int, *, overflow: str = "cut") -> Boundaries:
        """Every power of two from `smallest` to `largest`, both powers of two themselves."""
        for name, value in (("smallest", smallest), ("largest", largest)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"Boundaries.powers_of_two {name} must be a positive integer, not {value!r}")
            if int(value) & (int(value) - 1):
                raise ValueError(f"Boundaries.powers_of_two {name} must be a power of two, not {value}")
        if largest < smallest:
            raise ValueError(
                f"Boundaries.powers_of_two needs smallest <= largest; got {smallest} and {largest}"
            )
        lengths = [int(smallest)]
        while lengths[-1] < largest:
            lengths.append(lengths[-1] * 2)
        return cls(lengths, overflow=overflow)

    @property
    def largest(self) -> int:
        return self.lengths[-1]

    def buckets(self, lengths: np.ndarray) -> np.ndarray:
        """Each length's boundary, as an index into `lengths` (past the largest: the largest's)."""
        found = np.searchsorted(np.asarray(self.lengths, dtype=np.int64), np.asarray(lengths), side="left")
        return np.minimum(found, len(self.lengths) - 1).astype(np.int64)

    def refuse_overflow(self, lengths: np.ndarray, ordinals: np.ndarray, axis: str) -> None:
        """Under ``overflow="refuse"``, raise ValueError for the records past the largest boundary.

        The message says how many there are and names the first few, so that
        one error shows how far the boundaries fall short, not one record.
        """
        if self.overflow != "refuse":
            return
        lengths = np.asarray(lengths)
        over = np.flatnonzero(lengths > self.largest)
        if over.size == 0:
            return
        if over.size == 1:
            k = int(over[0])
            raise ValueError(
                f"record {int(ordinals[k])} holds {int(lengths[k])} positions along axis {axis!r}, more "
                f"than the largest boundary, {self.largest}, and {self!r} refuses to cut it; add a larger "
                "boundary, or pass overflow='cut' to keep the largest boundary's positions of it"
            )
        named = ", ".join(
            f"record {int(ordinals[k])} holds {int(lengths[k])}" for k in over[:_NAMED_OVERFLOWS]
        )
        rest = f" and {over.size - _NAMED_OVERFLOWS} more" if over.size > _NAMED_OVERFLOWS else ""
        raise ValueError(
            f"{over.size} records hold more positions along axis {axis!r} than the largest boundary, "
            f"{self.largest}, and {self!r} refuses to cut them: {named}{rest}; add a larger boundary "
            f"(the longest holds {int(lengths[over].max())}), or pass overflow='cut' to keep the "
            "largest boundary's positions of them"
        )

    def batch_length(self, lengths: np.ndarray, ordinals: np.ndarray, axis: str) -> int:
        """The length a batch of rows of `lengths` valid positions is padded (or cut) to."""
        if np.asarray(lengths).size == 0:
            return 0
        self.refuse_overflow(lengths, ordinals, axis)
        return self.lengths[int(self.buckets(np.asarray([np.max(lengths)]))[0])]

    def implied_waste(self, lengths: np.ndarray) -> float:
        """The share of padding when every record is padded to its own boundary (cut past the largest).

        What an epoch of `LengthBucketSampler` batches under these boundaries
        wastes, without rows added to fill a batch: each of its batches holds
        records of one boundary, and is padded to that boundary exactly.
        """
        lengths = np.asarray(lengths, dtype=np.int64)
        padded = int(np.asarray(self.lengths, dtype=np.int64)[self.buckets(lengths)].sum())
        valid = int(np.minimum(lengths, self.largest).sum())
        return 1.0 - valid / padded if padded else 0.0

    def __repr__(self) -> str:
        return f"Boundaries({self.lengths}, overflow={self.overflow!r})"


def boundaries_setting(value: Boundaries | Iterable[int] | None, owner: str) -> Boundaries | None:
    """`value` as Boundaries (a plain sequence of lengths becomes one), or None."""
    if value is None or isinstance(value, Boundaries):
        return value
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise TypeError(
            f"{owner} boundaries must be a sds_loader.Boundaries or a sequence of lengths, "
            f"not {type(value).__name__}"
        )
    return Boundaries(value)
