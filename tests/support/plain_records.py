"""A small dataset of plain records (two fields, numeric metadata) for the argument tests."""

from __future__ import annotations

import numpy as np
import signal_dataset as sds
from sds_factory import field

COUNT = 10


def plain_record(ordinal: int) -> sds.Record:
    rng = np.random.default_rng(8000 + ordinal)
    return sds.Record(
        id=f"plain-{ordinal}",
        fields={
            "iq": field(
                (rng.standard_normal((2, 16)) + 1j * rng.standard_normal((2, 16))).astype(np.complex64)
            ),
            "taps": field(rng.integers(-100, 100, size=(3, 4), dtype=np.int16)),
        },
        metadata={"label": ordinal % 3, "gain": float(ordinal) / 4},
    )
