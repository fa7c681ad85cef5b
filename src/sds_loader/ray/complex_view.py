"""Turn the float views of complex fields in a Ray batch back into complex values.

Ray 2.x has no complex tensor type: a complex column would be pickled row by
row as Python objects. `read_sds` therefore stores a complex field as its
float view, a trailing axis of 2 holding the real and the imaginary part
(complex64 becomes float32, complex128 float64), which is exactly numpy's and
torch's layout of complex numbers, so the way back is a view, not a copy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

_COMPLEX: dict[np.dtype[Any], np.dtype[Any]] = {
    np.dtype(np.float32): np.dtype(np.complex64),
    np.dtype(np.float64): np.dtype(np.complex128),
}


def to_complex(batch: Mapping[str, Any], fields: Sequence[str]) -> dict[str, Any]:
    """`batch` with each of `fields` (numpy arrays or torch tensors) viewed as complex again.

    Works on what ``iter_batches`` (numpy) and ``iter_torch_batches`` (torch)
    yield, and on a variable-shaped column's rows (an object array of arrays).
    Every other key is passed on as it is.
    """
    if isinstance(fields, str):
        fields = (fields,)
    out = dict(batch)
    for name in fields:
        if name not in batch:
            raise KeyError(f"to_complex: the batch has no {name!r}; its keys are {sorted(batch)}")
        out[name] = _complex(name, batch[name])
    return out


def _complex(name: str, value: Any) -> Any:
    if type(value).__module__.startswith("torch"):
        import torch

        if not value.is_floating_point() or value.dim() == 0 or value.shape[-1] != 2:
            raise ValueError(
                f"to_complex: {name!r} is {value.dtype} of shape {tuple(value.shape)}; a complex field's "
                "float view is float32 or float64 with a last axis of 2"
            )
        return torch.view_as_complex(value.contiguous())
    array = np.asarray(value)
    if array.dtype == object:
        rows = np.empty(array.shape, dtype=object)
        for index, row in enumerate(array.tolist()):
            rows[index] = _complex(name, row)
        return rows
    if array.dtype not in _COMPLEX or array.ndim == 0 or array.shape[-1] != 2:
        raise ValueError(
            f"to_complex: {name!r} is {array.dtype} of shape {array.shape}; a complex field's float "
            "view is float32 or float64 with a last axis of 2"
        )
    return np.ascontiguousarray(array).view(_COMPLEX[array.dtype])[..., 0]
