"""Datasets for the augmentation tests (tests/augment), written with signal_dataset's own writer.

Captures whose time axis carries a Coordinate (the sample rate signal_dataset
describes), in every layout a chain runs on: complex64 with two channels,
float32 and float64 IQ pairs; one without a Coordinate (its rate only in
metadata); records of varied length for windows. Each record's annotation
set ``bursts`` holds time positions, frequency edges relative to the centre,
absolute edges, and a class per item.
"""

from __future__ import annotations

import os

import numpy as np
import signal_dataset as sds
from sds_factory import write_dataset
from signal_dataset.annotation import AnnotationOptions, AnnotationRecord, AnnotationStatus

#: The captures' sample rate and centre frequency.
FS = 1e6
FC = 915e6
COUNT = 24
LENGTH = 1024


def coordinate_axis(n: int) -> sds.Axis:
    return sds.Axis("time", n, coordinate=sds.Coordinate(start=0.0, step=1.0 / FS, unit="s"))


def samples(ordinal: int, shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(ordinal)
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def metadata(ordinal: int) -> dict[str, object]:
    return {"snr_db": 3.0 + ordinal % 7, "fc": FC, "rate": FS, "label": ordinal % 3}


def complex_capture(ordinal: int) -> sds.Record:
    data = samples(ordinal, (2, LENGTH)).astype(np.complex64)
    axes = (sds.Axis("channel", 2), coordinate_axis(LENGTH))
    return sds.Record(
        id=f"c-{ordinal}", fields={"samples": sds.Field(data, axes=axes)}, metadata=metadata(ordinal)
    )


def pair_capture(dtype: type) -> object:
    def make(ordinal: int) -> sds.Record:
        data = samples(ordinal, (LENGTH,))
        pairs = np.stack([data.real, data.imag], axis=-1).astype(dtype)
        axes = (coordinate_axis(LENGTH), sds.Axis("iq", 2))
        return sds.Record(
            id=f"p-{ordinal}", fields={"iq": sds.Field(pairs, axes=axes)}, metadata=metadata(ordinal)
        )

    return make


def bare_capture(ordinal: int) -> sds.Record:
    data = samples(ordinal, (LENGTH,)).astype(np.complex64)
    field = sds.Field(data, axes=(sds.Axis("time", LENGTH),))
    return sds.Record(id=f"b-{ordinal}", fields={"samples": field}, metadata=metadata(ordinal))


def varied_length(ordinal: int) -> int:
    return 700 + 97 * ordinal


def varied_capture(ordinal: int) -> sds.Record:
    n = varied_length(ordinal)
    data = samples(ordinal, (n,)).astype(np.complex64)
    field = sds.Field(data, axes=(coordinate_axis(n),))
    return sds.Record(id=f"v-{ordinal}", fields={"samples": field}, metadata=metadata(ordinal))


def burst_row(dataset: sds.Dataset, ordinal: int, length: int) -> AnnotationRecord:
    """0 to 5 bursts: time positions, edges relative to the centre (some past +-fs/2), absolute
    edges, and a class each."""
    rng = np.random.default_rng(5000 + ordinal)
    events = ordinal % 6
    starts = rng.integers(0, length, events)
    times = np.stack([starts, starts + rng.integers(1, length // 3, events)], axis=1).astype(np.int64)
    low = rng.uniform(-0.55 * FS, 0.45 * FS, events)
    edges = np.stack([low, low + rng.uniform(1e3, 0.3 * FS, events)], axis=1)
    axes = (sds.Axis("event", events), sds.Axis("edge", 2))
    fields = {
        "times": sds.Field(times.reshape(events, 2), axes=axes),
        "edges": sds.Field(edges.reshape(events, 2), axes=axes),
        "rf": sds.Field((edges + FC).reshape(events, 2), axes=axes),
        "kind": sds.Field(
            np.arange(events, dtype=np.int64) + 10 * ordinal, axes=(sds.Axis("event", events),)
        ),
    }
    return AnnotationRecord(
        dataset.record_metadata[ordinal].id, ordinal, AnnotationStatus.SUCCESS, fields=fields
    )


def write(root: str, make: object, *, lengths: object = None, bursts: bool = False) -> str:
    dataset = write_dataset(root, COUNT, make, records_per_shard=10)  # type: ignore[arg-type]
    if bursts:
        sds.publish_annotations(
            dataset,
            "bursts",
            [burst_row(dataset, i, lengths(i) if lengths else LENGTH) for i in range(COUNT)],  # type: ignore[operator]
            options=AnnotationOptions(records_per_shard=7),
        )
    return os.fspath(root)
