"""Allocate batch arrays, or check the caller's before anything is written."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, cast

import numpy as np

from sds_loader.schema import Schema
from sds_loader.windows import length_key

if TYPE_CHECKING:
    from typing_extensions import Buffer

#: Allocates one uninitialised array; a pool or shared-memory allocator can
#: stand in for numpy's so that a batch is written where it will be consumed.
Allocator = Callable[[tuple[int, ...], np.dtype], np.ndarray]


def default_allocator(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    return np.empty(shape, dtype=dtype)


def allocate(schema: Schema, batch: int, allocator: Allocator | None = None) -> dict[str, np.ndarray]:
    """One fresh array per field, target and length, from `allocator` (numpy's by default).

    What a caller's allocator returns is checked as `out=` buffers are, naming
    `allocator=`: a wrong shape or dtype, or an object without the buffer
    protocol, is refused before anything is written.
    """
    layout = expected_layout(schema, batch)
    if allocator is None:
        return {name: default_allocator(shape, dtype) for name, (shape, dtype) in layout.items()}
    made = {name: allocator(shape, dtype) for name, (shape, dtype) in layout.items()}
    return _checked(made, layout, argument="allocator=", what="what allocator= returned for {name!r}")


def expected_layout(schema: Schema, batch: int) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    layout = {spec.name: ((batch, *spec.shape), spec.dtype) for spec in schema.fields}
    layout.update({target.key: ((batch,), target.dtype) for target in schema.targets})
    layout.update({length_key(name): ((batch,), np.dtype(np.int64)) for name in schema.lengths})
    return layout


def adopt(out: Mapping[str, object], schema: Schema, batch: int) -> dict[str, np.ndarray]:
    """View the caller's buffers as arrays, refusing any that do not fit exactly."""
    if not isinstance(out, Mapping):
        raise TypeError(f"out= must map names to buffers, not {type(out).__name__}")
    layout = expected_layout(schema, batch)
    unknown = sorted(set(out) - set(layout))
    missing = sorted(set(layout) - set(out))
    if unknown or missing:
        raise ValueError(
            f"out= names {sorted(out)} but this reader returns {sorted(layout)}"
            + (f"; missing {missing}" if missing else "")
            + (f"; unexpected {unknown}" if unknown else "")
        )
    return _checked(out, layout, argument="out=", what="out[{name!r}]")


def _checked(
    buffers: Mapping[str, object],
    layout: dict[str, tuple[tuple[int, ...], np.dtype]],
    *,
    argument: str,
    what: str,
) -> dict[str, np.ndarray]:
    """`buffers` viewed as arrays, each checked against `layout`; `what` names one in messages."""
    arrays: dict[str, np.ndarray] = {}
    for name, (shape, dtype) in layout.items():
        buffer = cast("Buffer", buffers[name])  # if it is none, memoryview() raises TypeError
        label = what.format(name=name)
        try:
            array = np.asarray(buffer) if isinstance(buffer, np.ndarray) else np.asarray(memoryview(buffer))
        except TypeError:
            raise TypeError(
                f"{label} is a {type(buffer).__name__}, which does not expose the "
                f"buffer protocol; {argument} takes numpy arrays (for a torch tensor, tensor.numpy())"
            ) from None
        if array.dtype != dtype:
            raise ValueError(f"{label} has dtype {array.dtype}; this batch needs {dtype}")
        if tuple(array.shape) != shape:
            raise ValueError(f"{label} has shape {tuple(array.shape)}; this batch needs {shape}")
        if not array.flags.c_contiguous:
            raise ValueError(
                f"{label} is not C-contiguous; pass np.ascontiguousarray(...) or a freshly allocated buffer"
            )
        if not array.flags.writeable:
            raise ValueError(f"{label} is read-only; pass a writable buffer")
        arrays[name] = array
    _refuse_overlap(arrays, argument)
    return arrays


def _refuse_overlap(arrays: dict[str, np.ndarray], argument: str) -> None:
    """Two buffers sharing memory would each receive the other's rows:
    refuse them, naming both, before anything is written."""
    names = sorted(arrays)
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            if arrays[first].nbytes and np.shares_memory(arrays[first], arrays[second]):
                raise ValueError(
                    f"{argument} gave {first!r} and {second!r} buffers that share memory; every field "
                    "and target needs a buffer of its own"
                )
