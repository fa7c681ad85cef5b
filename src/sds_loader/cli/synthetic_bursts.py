"""Long captures with bursts, and the annotation set that says where they are.

A burst detector trains on windows of long captures and the bursts each
window holds. `write_burst_captures` writes captures of noise in which 0 to 4
bursts of one modulation (sds_loader.cli.synthetic's) sit at random places and
frequency offsets, and publishes with signal_dataset's own writer an
annotation set ``bursts``: per capture, ``intervals`` ((n, 2) int64
half-open [start, stop) sample positions along ``time``) and ``freq``
((n, 2) float32, the burst's lowest and highest normalised frequency). The
set's metadata names the convention (``{"positions": {"intervals":
"time"}}``), since signal_dataset defines no interval type.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import signal_dataset as sds
from signal_dataset.annotation import AnnotationRecord, AnnotationStatus

from sds_loader.cli import synthetic

#: The annotation set `write_burst_captures` publishes.
SET_NAME = "bursts"
MAX_BURSTS = 4


def burst_capture(ordinal: int, length: int, seed: int = 0) -> tuple[sds.Record, np.ndarray, np.ndarray]:
    """Capture `ordinal` and its bursts' (intervals, freq), seeded by (seed, ordinal)."""
    rng = np.random.default_rng([seed, ordinal, 1])
    label = int(rng.integers(0, len(synthetic.MODULATIONS)))
    noise = 0.1 * (rng.standard_normal(length) + 1j * rng.standard_normal(length))
    samples = noise.astype(np.complex64)
    count = int(rng.integers(0, MAX_BURSTS + 1))
    intervals = np.zeros((count, 2), dtype=np.int64)
    freq = np.zeros((count, 2), dtype=np.float32)
    for k in range(count):
        duration = int(rng.integers(max(1, length // 20), max(2, length // 4)))
        start = int(rng.integers(0, max(1, length - duration)))
        stop = min(length, start + duration)
        burst, _ = synthetic.synthesize(label, stop - start, rng)
        offset = float(rng.uniform(-0.3, 0.3))
        burst = burst * np.exp(2j * np.pi * offset * np.arange(stop - start))
        samples[start:stop] += burst.astype(np.complex64)
        half = 0.5 / synthetic.SAMPLES_PER_SYMBOL
        intervals[k] = (start, stop)
        freq[k] = (offset - half, offset + half)
    order = np.argsort(intervals[:, 0], kind="stable")
    record = sds.Record(
        id=f"capture-{ordinal:07d}",
        fields={"samples": sds.Field(samples, axes=(sds.Axis("time", length),))},
        metadata={
            "label": label,
            "modulation": synthetic.MODULATIONS[label],
            "split": "val" if ordinal % 10 == 9 else "train",
        },
    )
    return record, intervals[order], freq[order]


def write_burst_captures(
    root: str,
    records: int,
    length: int,
    seed: int = 0,
    *,
    writer_options: str | None = None,
    on_record: Callable[[], object] | None = None,
) -> sds.Dataset:
    """Publish `records` captures with bursts at `root`, then their annotation set ``bursts``."""

    def make(ordinal: int, size: int, seed_: int, *, variable_length: bool = False) -> sds.Record:
        del variable_length
        return burst_capture(ordinal, size, seed_)[0]

    dataset = synthetic.write_captures(
        root, records, length, seed, writer_options=writer_options, on_record=on_record, make=make
    )
    rows = []
    for ordinal in range(records):
        _, intervals, freq = burst_capture(ordinal, length, seed)
        axes = (sds.Axis("burst", len(intervals)), sds.Axis("edge", 2))
        rows.append(
            AnnotationRecord(
                dataset.record_metadata[ordinal].id,
                ordinal,
                AnnotationStatus.SUCCESS,
                values={"bursts": len(intervals)},
                fields={"intervals": sds.Field(intervals, axes=axes), "freq": sds.Field(freq, axes=axes)},
                provenance={"generator": "sds-loader synth --bursts", "seed": seed},
            )
        )
    sds.publish_annotations(dataset, SET_NAME, rows, metadata={"positions": {"intervals": "time"}})
    return sds.open(os.fspath(root))
