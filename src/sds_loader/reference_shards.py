"""Where a reference dataset's ordinals live: explicit records of another dataset's shards.

A dataset published with signal_dataset's `DatasetView.publish` stores no
shards of its own. Each entry of its manifests names a shard of the dataset
the view was selected from (by absolute URI) and the records in it by
`record_indices`. signal_dataset's `read_instructions` refuses such entries
(an instruction carries the shard's own record count, which a reference does
not record), and nothing public says where their records are: its reader
resolves them in `_Index.locate`, from the snapshot's manifests.

So this module reads those same manifests, through the accessors the reader
itself uses, and turns every entry into runs of ordinals that one shard file
stores side by side (a sorted subset of a shard gives runs broken at its
gaps; a shuffled one, a run per record). `manifest_entries` is the only
place that touches signal_dataset's private API; tests/test_published_views.py
compares the runs with `locate` for every ordinal of several views, so a
change there fails that test rather than reading other records.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np
import signal_dataset as sds
from signal_dataset.storage import is_absolute_uri
from signal_dataset.storage.paths import join_uri


class ReferenceUnavailable(ValueError):
    """signal_dataset no longer resolves reference entries the way this module reads them."""


def manifest_entries(dataset: sds.Dataset) -> Iterator[Any]:
    """Every `ShardEntry` of the dataset's snapshot, in ordinal order.

    Private API, on purpose and only here: `_Index.snapshot.manifests` and
    `_Index._manifest` are how signal_dataset's own `locate` reaches an
    entry's `record_indices`, with the manifest checks it makes (stored
    bytes, ordinal ranges) and its manifest cache. No public call returns them.
    """
    try:
        index = dataset._index
        references = index.snapshot.manifests
        manifest = index._manifest
    except AttributeError as exc:
        raise ReferenceUnavailable(
            f"signal_dataset {getattr(sds, '__version__', '?')} no longer exposes a reference "
            f"dataset's manifests where sds-loader reads them ({exc})"
        ) from None
    for reference in references:
        yield from manifest(reference).shards


#: Tables already built, per dataset object: a view of a million records has
#: a million entries, and every reader of it (data, metadata, samplers) asks.
_TABLES: weakref.WeakKeyDictionary[
    sds.Dataset, dict[bool, tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray]]
]
_TABLES = weakref.WeakKeyDictionary()


def entry_file(
    dataset: sds.Dataset, entry: Any, paths: dict[str, int], sizes: list[int], *, metadata: bool
) -> int:
    """The file index of `entry`'s data (or metadata) object, numbering a new path as it is met.

    `sizes` gets each new path's declared bytes, or -1 for an absolute path
    into another dataset, whose size signal_dataset does not check either.
    """
    reference = entry.metadata if metadata else entry.data
    absolute = is_absolute_uri(reference.path)
    path = (reference.path if absolute else join_uri(dataset.root, reference.path)).removeprefix("file://")
    file = paths.get(path)
    if file is None:
        file = paths[path] = len(paths)
        sizes.append(-1 if absolute else int(reference.stored_bytes))
    return file


def reference_records(
    dataset: sds.Dataset, *, metadata: bool
) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray]:
    """(shard paths, file index per ordinal, record in that file per ordinal, declared sizes).

    A path's declared size is the bytes its entry says it holds, or -1 for an
    absolute path into another dataset, whose size signal_dataset does not
    check either (it is that dataset's to check).

    `metadata` addresses the metadata shards, which hold the same records at
    the same positions. Raises `ReferenceUnavailable` when the entries are not
    as signal_dataset 0.x writes them.
    """
    cached = _TABLES.setdefault(dataset, {})
    if metadata in cached:
        return cached[metadata]
    paths: dict[str, int] = {}
    sizes: list[int] = []
    # Python lists, extended per entry: a view's entries hold one record each,
    # and a numpy call per entry would cost more than the entry.
    files: list[int] = []
    records: list[int] = []
    for entry in manifest_entries(dataset):
        if entry.first_ordinal != len(records):
            raise ReferenceUnavailable(
                f"an entry of {dataset.root}'s manifests begins at ordinal {entry.first_ordinal}, "
                f"where {len(records)} was expected"
            )
        file = entry_file(dataset, entry, paths, sizes, metadata=metadata)
        local = range(entry.record_count) if entry.record_indices is None else entry.record_indices
        if len(local) != entry.record_count:
            raise ReferenceUnavailable(
                f"an entry of {dataset.root}'s manifests holds {entry.record_count} records and "
                f"{len(local)} record indices"
            )
        files.extend([file] * entry.record_count)
        records.extend(local)
    if len(records) != len(dataset):
        raise ReferenceUnavailable(
            f"{dataset.root}'s manifests name {len(records)} records, and the dataset holds {len(dataset)}"
        )
    table = (
        tuple(paths),
        np.asarray(files, dtype=np.int64),
        np.asarray(records, dtype=np.int64),
        np.asarray(sizes, dtype=np.int64),
    )
    cached[metadata] = table
    return table


def runs(files: np.ndarray, records: np.ndarray) -> np.ndarray:
    """Ordinals at which a new run begins: another file, or a record not next to the previous one."""
    if files.size == 0:
        return np.zeros(0, dtype=np.int64)
    breaks = (files[1:] != files[:-1]) | (records[1:] != records[:-1] + 1)
    return np.concatenate([[0], np.flatnonzero(breaks) + 1]).astype(np.int64)
