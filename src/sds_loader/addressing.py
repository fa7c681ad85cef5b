"""Which shard file and which record in it each ordinal names.

signal_dataset owns addressing: `Dataset.read_instructions` turns ordinals into
(shard file, record offset) runs, and this module only tabulates its answer
once so that a whole batch is located by one vectorised search instead of a
Python call per record. Control documents are never parsed here.

A reference dataset (a published `DatasetView`) is the exception:
`read_instructions` refuses it, and its runs come from its manifests as
signal_dataset's reader resolves them (`sds_loader.reference_shards`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import signal_dataset as sds

from sds_loader.reference_shards import ReferenceUnavailable, reference_records, runs
from sds_loader.storage import sources


@dataclass(frozen=True)
class ShardTable:
    """One row per contiguous run of ordinals stored in one shard file."""

    paths: tuple[str, ...]
    #: First ordinal of each run, ascending; a sentinel equal to the dataset
    #: length closes the last run.
    starts: np.ndarray
    #: Record offset inside the shard file of each run's first ordinal.
    skips: np.ndarray
    #: Index into `paths` of each run (one file may hold several runs).
    files: np.ndarray

    def locate(self, ordinals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(file index, record offset in that file) for each ordinal, in order."""
        run = np.searchsorted(self.starts, ordinals, side="right") - 1
        return self.files[run], self.skips[run] + (ordinals - self.starts[run])


def native_unavailable_reason(dataset: sds.Dataset) -> str | None:
    """Why the native path cannot address this dataset, or None if it can."""
    try:
        instructions = dataset.read_instructions(0, min(len(dataset), 1))
    except ValueError as exc:
        try:
            paths, _, _ = reference_records(dataset, metadata=False)
        except ReferenceUnavailable as why:
            return f"signal_dataset cannot address its shards directly ({exc}), and {why}"
        return sources.unavailable_reason(dataset, paths)
    return sources.unavailable_reason(dataset, [instruction.filename for instruction in instructions])


def shard_table(dataset: sds.Dataset, *, metadata: bool = False) -> ShardTable:
    """The data shards' table, or with `metadata` the metadata shards' (aligned record for record)."""
    try:
        instructions = dataset.read_instructions(0, len(dataset), metadata=metadata)
    except ValueError:
        # Refused only for entries with explicit record indices: a reference dataset.
        return _reference_table(dataset, metadata=metadata)
    path_index: dict[str, int] = {}
    starts, skips, files = [], [], []
    for instruction in instructions:
        path = instruction.filename
        if path.startswith("file://"):
            path = path[len("file://") :]
        files.append(path_index.setdefault(path, len(path_index)))
        starts.append(instruction.first_ordinal)
        skips.append(instruction.skip)
    starts.append(len(dataset))
    return ShardTable(
        paths=tuple(path_index),
        starts=np.asarray(starts, dtype=np.int64),
        skips=np.asarray(skips + [0], dtype=np.int64),
        files=np.asarray(files + [0], dtype=np.int64),
    )


def _reference_table(dataset: sds.Dataset, *, metadata: bool) -> ShardTable:
    """A reference dataset's table: one row per run its manifests store side by side."""
    paths, files, records = reference_records(dataset, metadata=metadata)
    first = runs(files, records)
    return ShardTable(
        paths=paths,
        starts=np.append(first, len(dataset)).astype(np.int64),
        skips=np.append(records[first], 0).astype(np.int64),
        files=np.append(files[first], 0).astype(np.int64),
    )
