"""Records whose length along "time" spreads 1:10 (205 to 2,048), for batches of bounded shapes.

The lengths fall in every power-of-two boundary from 256 to 2048, in no
order related to the ordinal, and each record's samples are its ordinal
(row 0) and a ramp (row 1), so that a row read back names its record and
its positions.
"""

from __future__ import annotations

import os

import numpy as np
import signal_dataset as sds
from sds_factory import write_dataset

#: Records in the dataset `write_spread` writes by default: a few hundred, each at most 8 KiB.
COUNT = 300
SHORTEST, LONGEST = 205, 2048
#: The boundaries the tests bucket these records by.
BOUNDARIES = (256, 512, 1024, 2048)


def spread_length(ordinal: int) -> int:
    return SHORTEST + (ordinal * 7919) % (LONGEST - SHORTEST + 1)


def spread_capture(ordinal: int) -> sds.Record:
    n = spread_length(ordinal)
    data = np.stack([np.full(n, ordinal, dtype=np.int16), np.arange(n, dtype=np.int16)])
    axes = (sds.Axis("channel", 2), sds.Axis("time", n))
    return sds.Record(
        id=f"spread-{ordinal:05d}",
        fields={"samples": sds.Field(data, axes=axes)},
        metadata={"label": ordinal},
    )


def write_spread(path: str | os.PathLike[str], count: int = COUNT) -> str:
    write_dataset(
        path, count, spread_capture, records_per_shard=100, writer_options="group_size:1,uncompressed"
    )
    return os.fspath(path)
