"""A batch `BatchReader.read` returns, as the Arrow table a Ray block is.

Each key becomes a column of one value per row, without a copy where Ray has
a type for it:

- A field or padded annotation field: Ray's tensor extension type, whose
  buffer is the array's own. A complex field (Ray has no complex tensor type
  and would pickle each row as a Python object) becomes its float view with a
  trailing axis of 2, real then imaginary, as numpy lays complex numbers out;
  `sds_loader.ray.to_complex` turns a batch back.
- A field under a window without a length: each row keeps its own positions
  (its ``<field>_length`` first ones) in Ray's variable-shaped tensor type,
  since Ray gathers rows of many reads into one batch and a pad fitted to one
  read's longest row means nothing there.
- A ragged annotation field: each row's own items, variable-shaped; the set's
  ``.offsets``, which only cut a batch's concatenated items into rows, are
  dropped.
- Targets, labels, lengths, ``ordinal``, ``start``: plain Arrow columns;
  ``id``: strings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from ray.data.extensions import ArrowTensorArray, ArrowVariableShapedTensorArray

from sds_loader.annotations import Annotations
from sds_loader.schema import Schema
from sds_loader.windows import Window, length_key


@dataclass(frozen=True)
class Layout:
    """Which keys of a read become rows of each their own shape, and which are dropped.

    Learnt once, in the driver, from the reader's layout; every task cuts its reads by it.
    """

    #: Window fields cut to each row's length: field -> (its ``<field>_length`` key, the window's axis).
    cut: Mapping[str, tuple[str, int]]
    #: Ragged annotation fields: items key -> the offsets key that cuts them into rows.
    ragged: Mapping[str, str]
    #: Offsets keys, dropped from the block.
    dropped: frozenset[str]


def layout(window: Window | None, schema: Schema, annotations: Sequence[Annotations]) -> Layout:
    """The layout of reads of `schema` (the reader's, as record 0 gave it) under `window`."""
    cut: dict[str, tuple[str, int]] = {}
    if window is not None and window.length is None:
        cut = {
            spec.name: (length_key(spec.name), spec.window_axis)
            for spec in schema.fields
            if spec.window_axis is not None
        }
    ragged: dict[str, str] = {}
    dropped: set[str] = set()
    for spec in annotations:
        if spec.max_items is None:
            offsets = f"{spec.name}.offsets"
            dropped.add(offsets)
            ragged.update({f"{spec.name}.{name}": offsets for name in spec.fields})
    return Layout(cut=cut, ragged=ragged, dropped=frozenset(dropped))


def float_view(array: np.ndarray) -> np.ndarray:
    """A complex array as its float view, (..., 2) real and imaginary; anything else as it is."""
    if array.dtype.kind != "c":
        return array
    array = np.ascontiguousarray(array)
    return array.view(array.real.dtype).reshape(*array.shape, 2)


def to_table(arrays: Mapping[str, np.ndarray], shape: Layout) -> pa.Table:
    """The Arrow table of one read: a column per key, rows in the read's order."""
    columns: dict[str, pa.Array] = {}
    for name, array in arrays.items():
        if name in shape.dropped:
            continue
        if name in shape.ragged:
            offsets = np.asarray(arrays[shape.ragged[name]])
            rows = [float_view(array[offsets[k] : offsets[k + 1]]) for k in range(offsets.size - 1)]
            columns[name] = _variable(rows)
        elif name in shape.cut:
            key, axis = shape.cut[name]
            lengths = (
                np.asarray(arrays[key]).tolist() if key in arrays else [array.shape[axis + 1]] * len(array)
            )
            keep = (slice(None),) * axis
            rows = [float_view(array[k][(*keep, slice(0, length))]) for k, length in enumerate(lengths)]
            columns[name] = _variable(rows)
        elif array.dtype == object:
            columns[name] = pa.array(array.tolist(), type=pa.string())
        elif array.ndim > 1 or array.dtype.kind == "c":
            columns[name] = ArrowTensorArray.from_numpy(float_view(array))
        else:
            columns[name] = pa.array(array)
    return pa.table(columns)


def _variable(rows: list[np.ndarray]) -> pa.Array:
    values = np.empty(len(rows), dtype=object)
    for k, row in enumerate(rows):  # element by element: rows of one shape would broadcast
        values[k] = row
    return ArrowVariableShapedTensorArray.from_numpy(values)
