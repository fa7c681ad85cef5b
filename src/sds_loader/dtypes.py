"""SafeTensors dtype names and the numpy dtypes they mean.

Everything is little-endian on disk. numpy has no bfloat16, and signal_dataset
0.4 writes none, so a record holding one is reported rather than guessed at.
"""

from __future__ import annotations

import numpy as np

SAFETENSORS_TO_NUMPY: dict[str, np.dtype] = {
    "BOOL": np.dtype("?"),
    "U8": np.dtype("u1"),
    "I8": np.dtype("i1"),
    "U16": np.dtype("<u2"),
    "I16": np.dtype("<i2"),
    "U32": np.dtype("<u4"),
    "I32": np.dtype("<i4"),
    "U64": np.dtype("<u8"),
    "I64": np.dtype("<i8"),
    "F16": np.dtype("<f2"),
    "F32": np.dtype("<f4"),
    "F64": np.dtype("<f8"),
    "C64": np.dtype("<c8"),
}


def numpy_dtype(name: str) -> np.dtype:
    try:
        return SAFETENSORS_TO_NUMPY[name]
    except KeyError:
        raise TypeError(
            f"SafeTensors dtype {name!r} has no numpy equivalent; sds-loader reads "
            f"{', '.join(SAFETENSORS_TO_NUMPY)}"
        ) from None


def safetensors_name(dtype: np.dtype) -> str:
    normalized = np.dtype(dtype).newbyteorder("<") if np.dtype(dtype).itemsize > 1 else np.dtype(dtype)
    for name, candidate in SAFETENSORS_TO_NUMPY.items():
        if candidate == normalized:
            return name
    raise TypeError(f"numpy dtype {dtype} has no SafeTensors equivalent")
