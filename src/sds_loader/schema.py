"""What one batch looks like: the selected fields' dtypes and shapes.

A batch is one array per field, so its layout must be known before the first
byte is decoded. The reader assumes the layout of the batch before (or, for the
first batch, of its first record) and lets the native core confirm every record
against it. A record that disagrees costs one slower pass over that batch, not
a per-record check in Python on every batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sds_loader.dtypes import numpy_dtype


@dataclass(frozen=True, slots=True)
class FieldSpec:
    name: str
    #: The SafeTensors key holding this field, from the record's descriptor.
    tensor: str
    #: SafeTensors dtype name, e.g. "C64".
    dtype_name: str
    shape: tuple[int, ...]

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

    def describe(self) -> str:
        return ", ".join(field.describe() for field in self.fields)

    def same_layout(self, other: Schema) -> bool:
        return [(f.name, f.dtype_name, f.shape) for f in self.fields] == [
            (f.name, f.dtype_name, f.shape) for f in other.fields
        ]


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


def raise_missing(key: str, ordinal: int, available: object = None) -> None:
    from sds_loader.errors import TargetError

    hint = f" (its metadata has {sorted(available)})" if available is not None else ""
    raise TargetError(
        f"record {ordinal} has no metadata key {key!r}{hint}; pass targets= with keys "
        "every record carries"
    )


def raise_not_scalar(key: str, ordinal: int, value: object) -> None:
    from sds_loader.errors import TargetError

    raise TargetError(
        f"metadata {key!r} of record {ordinal} is {type(value).__name__} {value!r}, not a "
        "number or bool; targets must be scalars (read structured metadata through "
        "signal_dataset's record_metadata instead)"
    )
