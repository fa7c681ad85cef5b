"""Records whose length along "time" varies with the ordinal, the axis at a different place in each field."""

from __future__ import annotations

import numpy as np
import signal_dataset as sds

COUNT = 11


def record_length(ordinal: int) -> int:
    return 5 + 9 * ordinal  # 5 .. 95


def varied(ordinal: int) -> sds.Record:
    n = record_length(ordinal)
    rng = np.random.default_rng(500 + ordinal)
    wave = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
    iq = rng.standard_normal((2, n)).astype(np.float32)
    cube = rng.integers(-30000, 30000, size=(2, n, 3), dtype=np.int16)
    first = rng.integers(0, 255, size=(n, 4), dtype=np.uint8)
    static = rng.standard_normal(5)
    time = sds.Axis("time", n)
    return sds.Record(
        id=f"varied-{ordinal:04d}",
        fields={
            "wave": sds.Field(wave, axes=(time,)),
            "iq": sds.Field(iq, axes=(sds.Axis("channel", 2), time)),
            "cube": sds.Field(cube, axes=(sds.Axis("channel", 2), time, sds.Axis("feature", 3))),
            "first": sds.Field(first, axes=(time, sds.Axis("byte", 4))),
            "static": sds.Field(static, axes=(sds.Axis("coefficient", 5),)),
        },
        metadata={"label": ordinal % 3},
    )
