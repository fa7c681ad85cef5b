"""What every member of a `Mixture` must agree on, checked when the mixture is made.

A mixed batch is one tensor per key, filled by each member in turn, so every
member must deliver the same keys, each with the same dtype and row shape
(items' shape, for ragged annotation fields), and a class index must name
the same class in every member. A member that differs is refused before any
DataLoader starts, with an error naming the member, the keys or classes that
differ, and the argument that makes them agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from sds_loader.torch.dataset import ragged_layout, row_layout, target_sources
from sds_loader.torch.extras import Kind

if TYPE_CHECKING:
    from sds_loader.torch.dataset import SDSTorchDataset

#: Output key -> (shape of one row, dtype).
RowLayout = dict[str, tuple[tuple[int, ...], np.dtype]]
#: Ragged key -> (kind, shape of one item, dtype; None for ids).
RaggedLayout = dict[str, tuple[Kind, tuple[int, ...], np.dtype | None]]


def agreed_layout(datasets: Sequence[SDSTorchDataset]) -> tuple[RowLayout, RaggedLayout]:
    """The row and ragged layouts every member delivers, or ValueError naming the member that differs."""
    rows: list[RowLayout] = []
    ragged: list[RaggedLayout] = []
    for position, dataset in enumerate(datasets):
        try:
            rows.append(row_layout(dataset))
            ragged.append(ragged_layout(dataset))
        except ValueError as error:
            raise ValueError(f"mixture member {position} ({dataset.uri}): {error}") from None
    _check_keys(datasets, [[*row, *more] for row, more in zip(rows, ragged, strict=True)])
    for position in range(1, len(datasets)):
        for key, (shape, dtype) in rows[0].items():
            other_shape, other_dtype = rows[position][key]
            if other_dtype != dtype or other_shape != shape:
                raise ValueError(
                    f"{_member(datasets, position)} delivers {key!r} as "
                    f"{_describe(other_shape, other_dtype)}, member 0 ({datasets[0].uri}) as "
                    f"{_describe(shape, dtype)}; a batch holds one tensor per key, so the members must "
                    "agree: select fields that agree, or, when only a length differs, give each member "
                    "a sds_loader.Window of one length"
                )
        for key, (kind, shape, item_dtype) in ragged[0].items():
            other_kind, other_shape, other_item_dtype = ragged[position][key]
            if (other_kind, other_shape, other_item_dtype) != (kind, shape, item_dtype):
                raise ValueError(
                    f"{_member(datasets, position)} delivers the items of {key!r} as "
                    f"{_describe(other_shape, other_item_dtype)}, member 0 ({datasets[0].uri}) as "
                    f"{_describe(shape, item_dtype)}; a batch holds one tensor per key, so the "
                    "members' annotation sets must agree on each field's dtype and item shape"
                )
    _check_classes(datasets)
    return rows[0], ragged[0]


def _member(datasets: Sequence[SDSTorchDataset], position: int) -> str:
    return f"mixture member {position} ({datasets[position].uri})"


def _describe(shape: tuple[int, ...], dtype: np.dtype | None) -> str:
    return f"{dtype} {shape}"


def _check_keys(datasets: Sequence[SDSTorchDataset], keys: Sequence[Sequence[str]]) -> None:
    first = set(keys[0])
    for position, own in enumerate(keys[1:], start=1):
        if set(own) == first:
            continue
        missing = sorted(first - set(own))
        extra = sorted(set(own) - first)
        raise ValueError(
            f"{_member(datasets, position)} delivers keys {sorted(own)}, member 0 ({datasets[0].uri}) "
            f"{sorted(first)}"
            + (f"; {position} lacks {missing}" if missing else "")
            + (f"; {position} adds {extra}" if extra else "")
            + ". Map the same output keys in every member with inputs=, target=, fields= and "
            "targets=, and pass every member the same annotations= (sets, fields, max_items) and extras="
        )


def _check_classes(datasets: Sequence[SDSTorchDataset]) -> None:
    """Every member's string targets index the same classes, or ValueError naming the member."""

    def classes(dataset: SDSTorchDataset) -> dict[str, tuple[str, ...]]:
        labels = dataset.reader.labels
        return {key: labels[name] for key, name in target_sources(dataset).items() if name in labels}

    def described(found: tuple[str, ...] | None) -> str:
        return "a metadata number" if found is None else f"an index into classes {list(found)}"

    first = classes(datasets[0])
    for position, dataset in enumerate(datasets[1:], start=1):
        own = classes(dataset)
        for key in sorted(set(first) | set(own)):
            if own.get(key) != first.get(key):
                raise ValueError(
                    f"{_member(datasets, position)} delivers {key!r} as {described(own.get(key))}, "
                    f"member 0 ({datasets[0].uri}) as {described(first.get(key))}: one value would mean "
                    "different things. Read the same metadata key in every member, and pass each "
                    "labels= with one class list"
                )
