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
    make = allocator or default_allocator
    arrays = {spec.name: make((batch, *spec.shape), spec.dtype) for spec in schema.fields}
    arrays.update({target.key: make((batch,), target.dtype) for target in schema.targets})
    arrays.update({length_key(name): make((batch,), np.dtype(np.int64)) for name in schema.lengths})
    return arrays


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
    arrays: dict[str, np.ndarray] = {}
    for name, (shape, dtype) in layout.items():
        buffer = cast("Buffer", out[name])  # if it is none, memoryview() raises TypeError
        try:
            array = np.asarray(buffer) if isinstance(buffer, np.ndarray) else np.asarray(memoryview(buffer))
        except TypeError:
            raise TypeError(
                f"out[{name!r}] is a {type(buffer).__name__}, which does not expose the "
                "buffer protocol; pass a numpy array (for a torch tensor, tensor.numpy())"
            ) from None
        if array.dtype != dtype:
            raise ValueError(f"out[{name!r}] has dtype {array.dtype}; this batch needs {dtype}")
        if tuple(array.shape) != shape:
            raise ValueError(f"out[{name!r}] has shape {tuple(array.shape)}; this batch needs {shape}")
        if not array.flags.c_contiguous:
            raise ValueError(
                f"out[{name!r}] is not C-contiguous; pass np.ascontiguousarray(...) or a "
                "freshly allocated buffer"
            )
        if not array.flags.writeable:
            raise ValueError(f"out[{name!r}] is read-only; pass a writable buffer")
        arrays[name] = array
    _refuse_overlap(arrays)
    return arrays


def _refuse_overlap(arrays: dict[str, np.ndarray]) -> None:
    """Two out= buffers sharing memory would each receive the other's rows:
    refuse them, naming both, before anything is written."""
    names = sorted(arrays)
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            if arrays[first].nbytes and np.shares_memory(arrays[first], arrays[second]):
                raise ValueError(
                    f"out[{first!r}] and out[{second!r}] share memory; every field and "
                    "target needs a buffer of its own"
                )
