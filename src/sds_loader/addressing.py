"""Which shard file and which record in it each ordinal names.

signal_dataset owns addressing: its snapshot's manifest pages list every
shard entry (first ordinal, record count, the data and metadata objects with
the bytes each holds), and its reader locates an ordinal from them. This
module reads those same entries, through the reader's own manifest reads and
checks (`reference_shards.manifest_entries`), once and in order, and
tabulates them so that a whole batch is located by one vectorised search
instead of a Python call per record.

Why not `Dataset.read_instructions`: it locates each shard afresh, rebuilding
the list of every shard start in the manifest page for each, which costs time
quadratic in the shards of a page (10,000 shards: 100 million steps, two
seconds, in every worker process). The entries are the same either way;
tests/test_addressing.py compares the table with `read_instructions` for
every shard, so a change in signal_dataset fails there rather than here.

A reference dataset (a published `DatasetView`) names explicit records of
other datasets' shards; its runs come from its manifests as signal_dataset's
reader resolves them (`sds_loader.reference_shards`).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
import signal_dataset as sds
from signal_dataset.storage import is_absolute_uri
from signal_dataset.storage.paths import join_uri

from sds_loader.reference_shards import (
    ReferenceUnavailable,
    manifest_entries,
    reference_records,
    runs,
)
from sds_loader.storage import sources
from sds_loader.storage.native_range import NativeRangeSource

#: A shard whose size signal_dataset does not check: an object a reference
#: dataset names in another dataset (signal_dataset's `_check_shard` skips it).
SIZE_NOT_DECLARED = -1


#: Tables already built, per dataset object and kind (data or metadata): the
#: reader, its metadata and the samplers all ask for them.
_TABLES: weakref.WeakKeyDictionary[sds.Dataset, dict[bool, ShardTable]] = weakref.WeakKeyDictionary()


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
    #: Per path, the bytes its manifest declares (SIZE_NOT_DECLARED: unchecked).
    sizes: np.ndarray | None = None
    #: The local dataset root below which paths are opened without following
    #: links; "" for object storage.
    root: str = ""

    def locate(self, ordinals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(file index, record offset in that file) for each ordinal, in order."""
        run = np.searchsorted(self.starts, ordinals, side="right") - 1
        return self.files[run], self.skips[run] + (ordinals - self.starts[run])

    def native(self, verify_checksums: bool, max_open_files: int, source: NativeRangeSource | None) -> Any:
        """A native `ShardSet` over these files, opened by signal_dataset's rules.

        Local files are opened below `root` without following links (regular
        files only), and every shard of a declared size is refused if it
        holds another, before its footer is read; `source` (None: local
        files) fetches the bytes of object storage.
        """
        from sds_loader import _native

        sizes = [] if self.sizes is None else self.sizes.tolist()
        # Any count past 2**32 means "no limit"; the native side takes a size_t.
        return _native.ShardSet(
            list(self.paths),
            verify_checksums,
            min(max_open_files, 1 << 32),
            source=source,
            sizes=sizes,
            root=self.root,
        )


def native_unavailable_reason(dataset: sds.Dataset) -> str | None:
    """Why the native path cannot address this dataset, or None if it can."""
    try:
        paths = shard_table(dataset).paths
    except ReferenceUnavailable as why:
        return f"signal_dataset's manifests are not as sds-loader reads them ({why})"
    return sources.unavailable_reason(dataset, paths)


def local_root(dataset: sds.Dataset) -> str:
    """The directory a local dataset's shards are confined to, or "" for object storage."""
    root = str(dataset.root)
    if sources.is_remote(root):
        return ""
    return root.removeprefix("file://").rstrip("/") or "/"


def shard_table(dataset: sds.Dataset, *, metadata: bool = False) -> ShardTable:
    """The data shards' table, or with `metadata` the metadata shards' (aligned record for record).

    Read from the snapshot's manifests once per dataset object and kept with it.
    """
    cached = _TABLES.setdefault(dataset, {})
    found = cached.get(metadata)
    if found is None:
        found = cached[metadata] = _build(dataset, metadata=metadata)
    return found


def _build(dataset: sds.Dataset, *, metadata: bool) -> ShardTable:
    path_index: dict[str, int] = {}
    sizes: list[int] = []
    starts: list[int] = []
    files: list[int] = []
    expected = 0
    for entry in manifest_entries(dataset):
        if entry.record_indices is not None:
            # Explicit records of other shards: a reference dataset's own route.
            return _reference_table(dataset, metadata=metadata)
        if entry.first_ordinal != expected:
            raise ReferenceUnavailable(
                f"an entry of {dataset.root}'s manifests begins at ordinal {entry.first_ordinal}, "
                f"where {expected} was expected"
            )
        expected += entry.record_count
        if entry.record_count == 0:
            continue
        reference = entry.metadata if metadata else entry.data
        absolute = is_absolute_uri(reference.path)
        path = (reference.path if absolute else join_uri(dataset.root, reference.path)).removeprefix(
            "file://"
        )
        file = path_index.get(path)
        if file is None:
            file = path_index[path] = len(path_index)
            sizes.append(SIZE_NOT_DECLARED if absolute else int(reference.stored_bytes))
        starts.append(entry.first_ordinal)
        files.append(file)
    if expected != len(dataset):
        raise ReferenceUnavailable(
            f"{dataset.root}'s manifests name {expected} records, and the dataset holds {len(dataset)}"
        )
    starts.append(len(dataset))
    return ShardTable(
        paths=tuple(path_index),
        starts=np.asarray(starts, dtype=np.int64),
        skips=np.zeros(len(starts), dtype=np.int64),
        files=np.asarray(files + [0], dtype=np.int64),
        sizes=np.asarray(sizes, dtype=np.int64),
        root=local_root(dataset),
    )


def _reference_table(dataset: sds.Dataset, *, metadata: bool) -> ShardTable:
    """A reference dataset's table: one row per run its manifests store side by side."""
    paths, files, records, sizes = reference_records(dataset, metadata=metadata)
    first = runs(files, records)
    return ShardTable(
        paths=paths,
        starts=np.append(first, len(dataset)).astype(np.int64),
        skips=np.append(records[first], 0).astype(np.int64),
        files=np.append(files[first], 0).astype(np.int64),
        sizes=sizes,
        root=local_root(dataset),
    )
