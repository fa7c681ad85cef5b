"""Turn whatever a caller passes as a batch of indices into validated ordinals."""

from __future__ import annotations

import numbers
from collections.abc import Iterable

import numpy as np

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_INT64 = np.dtype(np.int64)


def normalize(indices: Iterable[int] | np.ndarray, length: int) -> np.ndarray:
    """A 1-D int64 array of ordinals in [0, length), negatives counted from the end.

    Booleans and floats are refused rather than coerced: `True` as an index is
    almost always a mask passed by mistake, and `3.0` usually means a float
    tensor of indices built by accident upstream.
    """
    # The usual batch (a sampler's list, a shuffled permutation's slice):
    # wrapped and checked in one native pass, where the checks below cost a
    # small batch more than decoding one of its records.
    from sds_loader import _native

    if type(indices) is list or type(indices) is tuple:
        checked = _native.checked_int_sequence(indices, length)
        if checked is not None:
            return checked
    elif type(indices) is np.ndarray and indices.dtype == _INT64 and indices.ndim == 1:
        return _native.checked_ordinals(indices, length)
    if isinstance(indices, str | bytes) or not isinstance(indices, Iterable | np.ndarray):
        raise TypeError(f"indices must be a sequence of integers, not {type(indices).__name__}")
    if isinstance(indices, np.ndarray):
        array = indices
    else:
        values = list(indices)
        for value in values:
            if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
                raise TypeError(f"indices must be integers; got {type(value).__name__} {value!r}")
        for value in values:
            if not _INT64_MIN <= value <= _INT64_MAX:
                raise IndexError(f"index {int(value)} is out of range for a dataset of {length} records")
        array = np.asarray(values, dtype=np.int64) if values else np.zeros(0, dtype=np.int64)
    if array.ndim != 1:
        raise ValueError(f"indices must be one-dimensional; got shape {array.shape}")
    if array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"indices must be integers; got an array of {array.dtype}")
    if array.dtype == np.uint64 and array.size and array.max() > np.iinfo(np.int64).max:
        raise IndexError(f"index {int(array.max())} is out of range for {length} records")
    # Every value now fits int64 unchanged, so the native pass names the same index.
    return _native.checked_ordinals(array.astype(np.int64, copy=False), length)


def normalize_one(index: object, length: int) -> int:
    if isinstance(index, bool | np.bool_) or not isinstance(index, numbers.Integral):
        raise TypeError(f"index must be an integer, not {type(index).__name__}")
    if not _INT64_MIN <= int(index) <= _INT64_MAX:
        raise IndexError(f"index {int(index)} is out of range for a dataset of {length} records")
    return int(normalize(np.asarray([int(index)], dtype=np.int64), length)[0])
