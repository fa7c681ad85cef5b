"""The keys a batch carries beside fields and targets, and how each is laid out.

Annotation sets and ``extras=`` add keys of four kinds:

- ``row``: one value (or a fixed block) per row, stacked like a field:
  ``<set>.status``, ``<set>.count``, padded fields, ``ordinal``, ``start``.
- ``items``: a ragged field's items, concatenated in batch order, cut into
  rows by the set's offsets.
- ``offsets``: ``<set>.offsets``, B + 1 int64 saying where each row's items lie.
- ``ids``: record ids, a list of str.

`SDSTorchDataset` hands the last three to `Batch` whole (a sample cuts them by
its offsets); `Mixture` reads each member's part of a batch separately, so it
stacks the rows in place and merges the ragged parts here, in batch order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sds_loader.annotations import Annotations


@dataclass(frozen=True)
class Kind:
    """How one extra key is laid out; `offsets` names the offsets key of an ``items`` key."""

    kind: str
    offsets: str | None = None


def extra_kinds(annotations: Sequence[Annotations], extras: Sequence[str]) -> dict[str, Kind]:
    """Every key `annotations` and `extras` add to a batch, with its kind, in the batch's order."""
    kinds: dict[str, Kind] = {}
    for spec in annotations:
        offsets = f"{spec.name}.offsets"
        for key in spec.keys():
            if key == offsets and spec.max_items is None:
                kinds[key] = Kind("offsets")
            elif spec.max_items is None and key != f"{spec.name}.status":
                kinds[key] = Kind("items", offsets)
            else:
                kinds[key] = Kind("row")
    for key in extras:
        kinds[key] = Kind("ids") if key == "id" else Kind("row")
    return kinds


def merge_ragged(
    parts: Sequence[tuple[np.ndarray, dict[str, object]]], count: int, kinds: dict[str, Kind]
) -> dict[str, object]:
    """The ragged keys of a batch of `count` rows, from parts read separately.

    Each part is (the batch rows it holds, in its own order; its ragged keys
    as its own read returned them). Items land in batch-row order, so the
    merged offsets cut them as if the batch had been one read.
    """
    merged: dict[str, object] = {}
    ids: list[str] = [""] * count
    for rows, values in parts:
        if "id" in values:
            own = values["id"]
            assert isinstance(own, list)
            for row, record_id in zip(rows.tolist(), own, strict=True):
                ids[row] = record_id
    if any(kind.kind == "ids" for kind in kinds.values()):
        merged["id"] = ids
    for key, kind in kinds.items():
        if kind.kind != "offsets":
            continue
        counts = np.zeros(count, dtype=np.int64)
        for rows, values in parts:
            counts[rows] = np.diff(np.asarray(values[key]))
        offsets = np.zeros(count + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        merged[key] = offsets
        for item_key, item_kind in kinds.items():
            if item_kind.offsets != key:
                continue
            pieces = [(rows, np.asarray(values[key]), np.asarray(values[item_key])) for rows, values in parts]
            first = pieces[0][2]
            items = np.empty((int(offsets[-1]), *first.shape[1:]), dtype=first.dtype)
            for rows, own, part in pieces:
                # Item i of row r (in this part) goes to offsets[r] + (i - own[r]).
                lengths = np.diff(own)
                shift = np.repeat(offsets[rows] - own[:-1], lengths)
                items[shift + np.arange(int(own[-1]), dtype=np.int64)] = part
            merged[item_key] = items
    return merged
