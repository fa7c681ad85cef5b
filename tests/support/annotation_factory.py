"""Datasets with annotation sets, written with signal_dataset's own writer.

Records are captures of varied length along ``time`` with string and numeric
metadata; the set ``bursts`` has one row per record in every state a
producer can leave: successes with 0 to 5 events, skipped and failed rows,
and successes without fields (stored as signal_dataset's ``__empty__``
placeholder). Its shards are cut at other ordinals than the data shards.
"""

from __future__ import annotations

import os

import numpy as np
import signal_dataset as sds
from sds_factory import write_dataset
from signal_dataset.annotation import AnnotationOptions, AnnotationRecord, AnnotationStatus

COUNT = 23
MODULATIONS = ("bpsk", "qpsk", "fm")
SPLITS = ("train", "train", "val")


def record_length(ordinal: int) -> int:
    return 400 + 37 * ordinal


def capture(ordinal: int) -> sds.Record:
    n = record_length(ordinal)
    rng = np.random.default_rng(ordinal)
    return sds.Record(
        id=f"capture-{ordinal:04d}",
        fields={"samples": sds.Field(rng.standard_normal(n).astype(np.float32), axes=(sds.Axis("time", n),))},
        metadata={
            "label": ordinal % 3,
            "modulation": MODULATIONS[ordinal % 3],
            "split": SPLITS[ordinal % 3],
            "snr_db": float(ordinal) / 2,
            "flag": ordinal % 2 == 0,
        },
    )


def status_of(ordinal: int) -> AnnotationStatus:
    if ordinal % 7 == 3:
        return AnnotationStatus.SKIPPED
    if ordinal % 7 == 5:
        return AnnotationStatus.FAILED
    return AnnotationStatus.SUCCESS


def row(dataset: sds.Dataset, ordinal: int) -> AnnotationRecord:
    status = status_of(ordinal)
    events = ordinal % 6
    rng = np.random.default_rng(1000 + ordinal)
    starts = rng.integers(0, record_length(ordinal), events)
    stops = starts + rng.integers(1, 200, events)
    intervals = np.stack([starts, stops], axis=1).astype(np.int64).reshape(events, 2)
    freq = rng.standard_normal((events, 2)).astype(np.float32)
    fields: dict[str, sds.Field] = {}
    # Failed rows still carry tensors here: a reader must return none of them.
    if ordinal % 5 != 4:
        axes = (sds.Axis("event", events), sds.Axis("edge", 2))
        fields = {"intervals": sds.Field(intervals, axes=axes), "freq": sds.Field(freq, axes=axes)}
    return AnnotationRecord(
        dataset.record_metadata[ordinal].id,
        ordinal,
        status,
        values={"events": events, "note": f"row {ordinal}"},
        fields=fields,
        provenance={"model": "detector-v1", "ordinal": ordinal},
        detail_status=None if status is AnnotationStatus.SUCCESS else f"reason {ordinal}",
    )


def write_annotated(root: str | os.PathLike[str], *, writer_options: str | None = None) -> sds.Dataset:
    dataset = write_dataset(root, COUNT, capture, records_per_shard=10, writer_options=writer_options)
    sds.publish_annotations(
        dataset,
        "bursts",
        [row(dataset, i) for i in range(COUNT)],
        metadata={"positions": {"intervals": "time"}},
        options=AnnotationOptions(records_per_shard=6),
    )
    return sds.open(os.fspath(root))
