"""What one batch looks like: the selected fields' dtypes and shapes.

A batch is one array per field, so its layout must be known before the first
byte is decoded. The reader assumes the layout of the batch before (or, for the
first batch, of its first record) and lets the native core confirm every record
against it. A record that disagrees costs one slower pass over that batch, not
a per-record check in Python on every batch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NoReturn

import numpy as np

from sds_loader.dtypes import numpy_dtype


@dataclass(frozen=True, slots=True)
class FieldSpec:
    name: str
    #: The SafeTensors key holding this field, from the record's descriptor.
    tensor: str
    #: SafeTensors dtype name, e.g. "C64".
    dtype_name: str
    #: The shape of the field in a batch row: a window's length along the
    #: window's axis, the record's own shape elsewhere.
    shape: tuple[int, ...]
    #: Which axis of `shape` a window cuts, or None when the field is read whole.
    window_axis: int | None = None

    def windowed(self, length: int) -> FieldSpec:
        if self.window_axis is None:
            return self
        shape = list(self.shape)
        shape[self.window_axis] = length
        return FieldSpec(self.name, self.tensor, self.dtype_name, tuple(shape), self.window_axis)

    def layout_key(self) -> tuple[str, str, tuple[int, ...]]:
        """What records must agree on to share a batch: all but the window's axis."""
        shape = list(self.shape)
        if self.window_axis is not None:
            shape[self.window_axis] = -1
        return (self.name, self.dtype_name, tuple(shape))

    @property
    def dtype(self) -> np.dtype:
        return numpy_dtype(self.dtype_name)

    def describe(self) -> str:
        return f"{self.name}: {self.dtype} {self.shape}"


@dataclass(frozen=True, slots=True)
class TargetSpec:
    key: str
    #: "i" for int64 (integers and bools), "f" for float64 (other numbers).
    kind: str

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.int64) if self.kind == "i" else np.dtype(np.float64)


@dataclass(frozen=True, slots=True)
class Schema:
    fields: tuple[FieldSpec, ...]
    targets: tuple[TargetSpec, ...]
    #: Fields whose valid window positions come back as ``<field>_length``.
    lengths: tuple[str, ...] = ()

    def describe(self) -> str:
        return ", ".join(field.describe() for field in self.fields)

    def windowed(self, length: int) -> Schema:
        """This layout with every windowed field cut to `length` along the window's axis."""
        return Schema(tuple(f.windowed(length) for f in self.fields), self.targets, self.lengths)

    def same_layout(self, other: Schema) -> bool:
        return [f.layout_key() for f in self.fields] == [f.layout_key() for f in other.fields]


def target_kind(value: object, *, key: str, ordinal: int) -> str:
    """Classify one metadata value, refusing anything that is not a scalar number."""
    if isinstance(value, bool) or isinstance(value, int):
        return "i"
    if isinstance(value, float):
        return "f"
    if value is None:
        raise_missing(key, ordinal)
    raise_not_scalar(key, ordinal, value)
    raise AssertionError("unreachable")


def raise_missing(key: str, ordinal: int, available: Iterable[str] | None = None) -> NoReturn:
    from sds_loader.errors import TargetError

    hint = f" (its metadata has {sorted(available)})" if available is not None else ""
    raise TargetError(
        f"record {ordinal} has no metadata key {key!r}{hint}; pass targets= with keys every record carries"
    )


def raise_not_scalar(key: str, ordinal: int, value: object) -> NoReturn:
    from sds_loader.errors import TargetError

    raise TargetError(
        f"metadata {key!r} of record {ordinal} is {type(value).__name__} {value!r}, not a "
        "number or bool; targets must be scalars (read structured metadata through "
        "signal_dataset's record_metadata instead)"
    )
