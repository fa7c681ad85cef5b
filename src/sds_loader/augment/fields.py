"""Which fields a chain augments, where their time axis is, and their rows as complex samples.

A chain runs along each field's time axis, which must be its innermost
complex axis: the last axis of a complex64 field, the one before the
trailing ``(I, Q)`` pair of a float32 or float64 pair field. Leading axes
are channels, each augmented alike (noise apart). The native core sees every
row as ``(rows, channels, samples)`` complex values: a pair field is viewed
as complex (the same bytes), float64 pairs as complex128.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sds_loader.schema import FieldSpec, RecordLayout

#: How each augmentable field is seen as complex: its dtype name -> the complex dtype.
COMPLEX_VIEWS = {"C64": np.dtype(np.complex64), "F32": np.dtype(np.complex64), "F64": np.dtype(np.complex128)}


@dataclass(frozen=True)
class AugmentedField:
    """One field a chain runs on: its name, its time axis, and whether it holds (I, Q) pairs."""

    name: str
    axis: str
    pairs: bool


def augmentable(spec: FieldSpec) -> bool:
    """Complex64, or float32/float64 with a trailing axis of 2 (I, Q)."""
    if spec.dtype_name == "C64":
        return len(spec.shape) >= 1
    return spec.dtype_name in ("F32", "F64") and len(spec.shape) >= 2 and spec.shape[-1] == 2


def _describe(spec: FieldSpec) -> str:
    return f"{spec.name!r} ({spec.dtype} {spec.shape})"


def augmented_fields(
    specs: tuple[FieldSpec, ...], layout: RecordLayout, named: tuple[str, ...] | None
) -> tuple[AugmentedField, ...]:
    """The fields a chain augments among the reader's `specs` (record 0's `layout` gives axis names).

    `named` (Chain(fields=)) must all be read and augmentable; None takes
    every complex64 field read, or where there is none every pair field.
    ValueError says which and why otherwise.
    """
    by_name = {spec.name: spec for spec in specs}
    if named is not None:
        missing = [name for name in named if name not in by_name]
        if missing:
            raise ValueError(
                f"Chain(fields=...) names {missing[0]!r}, which the reader does not read; its fields are "
                f"{list(by_name)} (select it with fields=)"
            )
        chosen = [by_name[name] for name in named]
        refused = [spec for spec in chosen if not augmentable(spec)]
        if refused:
            raise ValueError(
                f"Chain(fields=...) names {_describe(refused[0])}, which is not complex64 nor real IQ pairs "
                "(float32 or float64 with a trailing axis of 2); augment complex fields only"
            )
    else:
        # Complex fields when there are any: a float pair field beside them is
        # more likely a pair of something else (positions, limits) than IQ.
        chosen = [spec for spec in specs if spec.dtype_name == "C64" and augmentable(spec)]
        chosen = chosen or [spec for spec in specs if augmentable(spec)]
        if not chosen:
            shown = ", ".join(_describe(spec) for spec in specs) or "none"
            raise ValueError(
                f"an augmentation chain needs a complex64 field or real IQ pairs (..., 2) to run on, and the "
                f"reader reads {shown}; select one with fields=, or name it with Chain(fields=...)"
            )
    out: list[AugmentedField] = []
    for spec in chosen:
        pairs = spec.dtype_name != "C64"
        axes = layout[spec.name].axes if spec.name in layout else ()
        index = len(spec.shape) - (2 if pairs else 1)
        axis = axes[index] if len(axes) == len(spec.shape) else ""
        out.append(AugmentedField(spec.name, axis, pairs))
    axes_seen = {item.axis for item in out}
    if len(axes_seen) > 1:
        shown = ", ".join(f"{item.name!r} along {item.axis!r}" for item in out)
        raise ValueError(
            f"the fields a chain augments must share one time axis, and {shown} do not; "
            "name the fields of one axis with Chain(fields=...)"
        )
    return tuple(out)


def complex_rows(array: np.ndarray, pairs: bool) -> np.ndarray:
    """A batch array of one field as (rows, channels, samples) complex values, without a copy."""
    shape = array.shape[:-1] if pairs else array.shape
    channels = math.prod(shape[1:-1])
    # Viewed as numpy's own complex dtype even when it is one already: a buffer
    # another library made may carry an equal dtype object that is not numpy's.
    wide = array.dtype.itemsize == (8 if pairs else 16)
    view = array.view(_COMPLEX128 if wide else _COMPLEX64)
    return view.reshape(shape[0], channels, shape[-1])


_COMPLEX64 = np.dtype(np.complex64)
_COMPLEX128 = np.dtype(np.complex128)
