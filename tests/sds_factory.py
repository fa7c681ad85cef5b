"""Write small SDS datasets with signal_dataset itself, for tests to read back.

Every fidelity test compares against `signal_dataset.open(root)`, so datasets
are written through signal_dataset's public writer, never by hand.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import signal_dataset as sds

#: Builds record `ordinal` of a dataset.
RecordMaker = Callable[[int], sds.Record]


def field(data: np.ndarray, axis_prefix: str = "a") -> sds.Field:
    """A Field with one named axis per dimension, as signal_dataset requires."""
    axes = tuple(sds.Axis(f"{axis_prefix}{k}", int(n)) for k, n in enumerate(data.shape))
    return sds.Field(data, axes=axes)


def capture(ordinal: int, *, channels: int = 2, samples: int = 256, classes: int = 4) -> sds.Record:
    """A complex64 capture with an integer label and a float SNR, seeded by ordinal."""
    rng = np.random.default_rng(ordinal)
    shape = (channels, samples)
    data = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
    return sds.Record(
        id=f"capture-{ordinal:06d}",
        fields={"samples": field(data)},
        metadata={"label": ordinal % classes, "snr_db": float(rng.uniform(-5, 20))},
    )


def write_dataset(
    root: str | os.PathLike,
    count: int,
    make: RecordMaker = capture,
    *,
    records_per_shard: int | None = None,
    writer_options: str | None = None,
    shards_per_manifest: int | None = None,
) -> sds.Dataset:
    """Publish `count` records made by `make`, split into shards of equal size."""
    root = os.fspath(root)
    per_shard = records_per_shard or max(count, 1)
    storage = sds.StorageOptions(writer_options=writer_options) if writer_options else None
    shards = []
    for shard_number, start in enumerate(range(0, count, per_shard)):
        stop = min(start + per_shard, count)
        records: Iterator[sds.Record] = (make(i) for i in range(start, stop))
        shards.append(
            sds.write_shard(records, root, work_id=f"{shard_number:06d}", options=storage)
        )
    publication = (
        sds.PublicationOptions(shards_per_manifest=shards_per_manifest)
        if shards_per_manifest
        else None
    )
    return sds.publish(
        root,
        shards,
        dataset_id="test",
        snapshot_id="v1",
        publication_options=publication,
    )


def data_shards(root: str | os.PathLike) -> list[str]:
    """The data shard files of a dataset, in a stable order."""
    return sorted(glob.glob(os.path.join(os.fspath(root), "objects", "data", "*", "*.arrayrecord")))


def assert_matches_reference(
    root: str | os.PathLike,
    batch: dict[str, np.ndarray],
    indices: Sequence[int],
    fields: Sequence[str],
    targets: Sequence[str] = (),
) -> None:
    """Every row equals signal_dataset's record, byte for byte."""
    reference = sds.open(os.fspath(root))
    for row, index in enumerate(indices):
        record = reference[index]
        for name in fields:
            expected = record[name].data
            got = batch[name][row]
            assert got.dtype == expected.dtype, (index, name, got.dtype, expected.dtype)
            assert got.shape == expected.shape, (index, name, got.shape, expected.shape)
            assert got.tobytes() == expected.tobytes(), (index, name)
        for key in targets:
            assert batch[key][row] == record.metadata[key], (index, key)
