"""A dataset as the reader sees it: its root opened, and where each ordinal's record lives.

Opening. `signal_dataset.open` reports a wrong path as the file it looked
for: a directory that holds no dataset answers "No such file or directory:
'root.json'", naming neither the path the caller passed nor what belongs
there. Every place sds-loader opens a dataset goes through `open_dataset`,
which raises `DatasetNotFoundError` naming the path and its problem (missing,
a file, a directory without root.json), with signal_dataset's own error kept
as the cause. It subclasses FileNotFoundError, so code that caught
signal_dataset's error still catches this one.

Addressing. signal_dataset owns it: its snapshot's manifest pages list every
shard entry (first ordinal, record count, the data and metadata objects with
the bytes each holds), and its reader locates an ordinal from them. This
module reads those same entries once, in order, into compact arrays
(`manifest_pages`; signal_dataset's own `Manifest` parser for pages outside
its fixed layout), so that a whole batch is located by one vectorised search
instead of a Python call per record.

Why not `Dataset.read_instructions`: it locates each shard afresh, rebuilding
the list of every shard start in the manifest page for each, which costs time
quadratic in the shards of a page (10,000 shards: 100 million steps, two
seconds, in every worker process). The entries are the same either way;
tests/core/test_addressing.py compares the table with `read_instructions` for
every shard, so a change in signal_dataset fails there rather than here.

A table is built once per job, not once per process: tables are kept by the
identity of the snapshot they describe (root, snapshot id, and each manifest
page's path, version and size), so a forked worker finds its parent's, and
a pickled reader carries its tables to a spawned one (`export_tables`/`adopt_tables`),
where they are used only if the snapshot the worker opens has that identity.
With a node cache, tables are also kept as files in it (`table_files`), so
the other ranks of a node load the first one's instead of reading the
manifest pages again.

References. A dataset published with signal_dataset's `DatasetView.publish`
stores no shards of its own. Each entry of its manifests names a shard of the
dataset the view was selected from (by absolute URI) and the records in it by
`record_indices`. signal_dataset's `read_instructions` refuses such entries
(an instruction carries the shard's own record count, which a reference does
not record), and nothing public says where their records are: its reader
resolves them in `_Index.locate`, from the snapshot's manifests. So
`manifest_entries` reads those same manifests, through the accessors the
reader itself uses, and every entry becomes runs of ordinals that one shard
file stores side by side (a sorted subset of a shard gives runs broken at its
gaps; a shuffled one, a run per record). `manifest_entries` is the only place
that touches signal_dataset's private API; tests/core/test_published_views.py
compares the runs with `locate` for every ordinal of several views, so a
change there fails that test rather than reading other records.
"""

from __future__ import annotations

import hashlib
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import signal_dataset as sds
from signal_dataset.storage import is_absolute_uri
from signal_dataset.storage.paths import join_uri

from sds_loader import table_files
from sds_loader.manifest_pages import fixed_layout_entries
from sds_loader.shard_names import ShardNames
from sds_loader.storage import sources
from sds_loader.storage.native_range import NativeRangeSource

# -- opening a root ---------------------------------------------------------

#: The document `signal_dataset.publish` writes at the top of every dataset.
ROOT_DOCUMENT = "root.json"

WHAT_A_ROOT_HOLDS = (
    "a dataset root is the directory signal_dataset.publish writes, holding root.json, "
    "the snapshot it names and objects/ with the shards (`sds-loader synth PATH` writes one to try)"
)


class DatasetNotFoundError(FileNotFoundError):
    """The path is missing, is a file, or is a directory that holds no dataset.

    The message names the path and what a dataset root holds;
    ``__cause__`` is the error signal_dataset raised.
    """


def open_dataset(uri: str, **options: Any) -> sds.Dataset:
    """`signal_dataset.open(uri, **options)`, with an error that names `uri` if it is no dataset root."""
    try:
        return sds.open(uri, **options)
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise DatasetNotFoundError(problem(uri, exc)) from exc


def problem(uri: str, error: OSError) -> str:
    """What is wrong with `uri` as a dataset root, given the error opening it raised."""
    if "://" in uri and not uri.startswith("file://"):
        return f"no dataset at {uri} ({error}); {WHAT_A_ROOT_HOLDS}"
    path = uri.removeprefix("file://")
    if not os.path.lexists(path):
        parent = os.path.dirname(os.path.abspath(path))
        where = "" if os.path.isdir(parent) else f" (nor does its parent {parent})"
        return f"{uri} does not exist{where}; {WHAT_A_ROOT_HOLDS}"
    if not os.path.isdir(path):
        return f"{uri} is a file, not a dataset root; {WHAT_A_ROOT_HOLDS}"
    if not os.path.exists(os.path.join(path, ROOT_DOCUMENT)):
        return (
            f"{uri} is a directory but not a dataset root: it holds no {ROOT_DOCUMENT}; {WHAT_A_ROOT_HOLDS}"
        )
    # root.json is there, so something it names is not: the dataset is incomplete.
    return f"dataset {uri} is incomplete: {error}"


# -- references: records of other datasets' shards ---------------------------


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
_REFERENCE_RUNS: weakref.WeakKeyDictionary[
    sds.Dataset, dict[bool, tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray]]
]
_REFERENCE_RUNS = weakref.WeakKeyDictionary()


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
    cached = _REFERENCE_RUNS.setdefault(dataset, {})
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


# -- the shard table ---------------------------------------------------------

#: A shard whose size signal_dataset does not check: an object a reference
#: dataset names in another dataset (signal_dataset's `_check_shard` skips it).
SIZE_NOT_DECLARED = -1


#: Tables already built, by the identity of the snapshot and the kind of
#: shards they describe: the reader, its metadata, the samplers and every
#: worker forked after them ask. A few datasets a process, so a few kept.
_KEPT_TABLES = 16
_TABLES: OrderedDict[str, ShardTable] = OrderedDict()
_TABLES_LOCK = threading.Lock()


def _fresh_lock_after_fork() -> None:
    global _TABLES_LOCK
    # A parent thread may have held it at the fork; the tables themselves are the child's to use.
    _TABLES_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fresh_lock_after_fork)


@dataclass(frozen=True)
class ShardTable:
    """One row per contiguous run of ordinals stored in one shard file."""

    #: The shard files, by file index (a `ShardNames`, compact where it can be).
    paths: Sequence[str]
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
        """(file index, record offset in that file) for each ordinal, in order.

        IndexError for an ordinal outside the table (callers pass ordinals
        already checked against the dataset, `indices.normalize`).
        """
        from sds_loader import _native

        return _native.locate_ordinals(self.starts, self.skips, self.files, ordinals)

    def native(
        self, verify_checksums: bool | str, max_open_files: int, source: NativeRangeSource | None
    ) -> Any:
        """A native `ShardSet` over these files, opened by signal_dataset's rules.

        Local files are opened below `root` without following links (regular
        files only), and every shard of a declared size is refused if it
        holds another, before its footer is read; `source` (None: local
        files) fetches the bytes of object storage.
        """
        from sds_loader import _native

        names = self.paths if isinstance(self.paths, ShardNames) else ShardNames(self.paths)
        # The set borrows the sizes and the runs rather than copying them (a
        # dataset of 100,000 shards would otherwise hold them again in each
        # set), so it takes int64 arrays in C order, as these are.
        sizes = None if self.sizes is None else np.ascontiguousarray(self.sizes, dtype=np.int64)
        # Any count past 2**32 means "no limit"; the native side takes a size_t.
        native = _native.ShardSet(
            verify_checksums=verify_checksums,
            max_open_files=min(max_open_files, 1 << 32),
            source=source,
            sizes=sizes,
            root=self.root,
            **names.native_arguments(),
        )
        # So that a batch can be read by its ordinals alone (read_ordinals).
        columns = (self.starts, self.skips, self.files)
        native.keep_runs(*(np.ascontiguousarray(column, dtype=np.int64) for column in columns))
        return native

    @property
    def held_bytes(self) -> int:
        """Bytes this table keeps: its arrays and its shard names."""
        arrays = (self.starts, self.skips, self.files, self.sizes)
        names = self.paths.held_bytes if isinstance(self.paths, ShardNames) else 0
        return sum(array.nbytes for array in arrays if array is not None) + names


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


def identity(dataset: sds.Dataset, *, metadata: bool = False) -> str:
    """What a table describes: the root, the snapshot, each manifest page's path, version and size."""
    described: list[object]
    try:
        pages = dataset._index.snapshot.manifests
        described = [
            (page.object.path, page.object.generation, page.object.stored_bytes, page.shard_count)
            for page in pages
        ]
    except AttributeError:
        described = [("no pages known", id(dataset))]
    text = repr((metadata, str(dataset.root), dataset.snapshot_id, len(dataset), described))
    return hashlib.sha256(text.encode()).hexdigest()


def shard_table(dataset: sds.Dataset, *, metadata: bool = False) -> ShardTable:
    """The data shards' table, or with `metadata` the metadata shards' (aligned record for record).

    Read from the snapshot's manifests once per process and snapshot (and
    passed on to forked and spawned workers: module docstring).
    """
    key = identity(dataset, metadata=metadata)
    with _TABLES_LOCK:
        found = _TABLES.get(key)
        if found is not None:
            _TABLES.move_to_end(key)
            return found
    cache = sources.cache_of(dataset)
    origin = table_files.Origin(
        root=str(dataset.root).removeprefix("file://"),
        kind="metadata" if metadata else "data",
        table_root=local_root(dataset),
    )
    kept = None if cache is None else table_files.load(cache.directory, key, len(dataset), origin)
    if kept is not None:
        made = ShardTable(**kept)
    else:
        made = _build(dataset, metadata=metadata)
        if cache is not None:
            table_files.save(cache.directory, key, made, origin)
    _keep(key, made)
    return made


def _keep(key: str, table: ShardTable) -> None:
    with _TABLES_LOCK:
        _TABLES[key] = table
        _TABLES.move_to_end(key)
        while len(_TABLES) > _KEPT_TABLES:
            _TABLES.popitem(last=False)


def export_tables(dataset: sds.Dataset) -> dict[str, ShardTable]:
    """The tables this process has built for `dataset`, by identity, for a pickle."""
    keys = [identity(dataset, metadata=kind) for kind in (False, True)]
    with _TABLES_LOCK:
        return {key: _TABLES[key] for key in keys if key in _TABLES}


def adopt_tables(tables: dict[str, ShardTable]) -> None:
    """Keep tables another process built: used only for a snapshot of the same identity."""
    for key, table in tables.items():
        if isinstance(key, str) and isinstance(table, ShardTable):
            _keep(key, table)


def _build(dataset: sds.Dataset, *, metadata: bool) -> ShardTable:
    fast = fixed_layout_entries(dataset, metadata=metadata)
    if fast is not None:
        return _fixed_layout_table(dataset, fast)
    return _entries_table(dataset, metadata=metadata)


def _fixed_layout_table(dataset: sds.Dataset, fast: Any) -> ShardTable:
    """The table of a snapshot whose every entry is one shard in signal_dataset's layout."""
    ends = np.cumsum(fast.counts)
    if ends.size and ends[-1] != len(dataset) or not np.array_equal(fast.first, ends - fast.counts):
        raise ReferenceUnavailable(
            f"{dataset.root}'s manifests do not list its {len(dataset)} records one after another"
        )
    held = fast.counts > 0
    starts = fast.first[held]
    return ShardTable(
        paths=ShardNames(
            root=str(dataset.root).removeprefix("file://"), kind=fast.kind, digests=fast.digests[held]
        ),
        starts=np.append(starts, len(dataset)).astype(np.int64),
        skips=np.zeros(starts.size + 1, dtype=np.int64),
        files=np.append(np.arange(starts.size, dtype=np.int64), 0),
        sizes=fast.sizes[held],
        root=local_root(dataset),
    )


def _entries_table(dataset: sds.Dataset, *, metadata: bool) -> ShardTable:
    """The table from signal_dataset's own parse of every manifest entry."""
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
        starts.append(entry.first_ordinal)
        files.append(entry_file(dataset, entry, path_index, sizes, metadata=metadata))
    if expected != len(dataset):
        raise ReferenceUnavailable(
            f"{dataset.root}'s manifests name {expected} records, and the dataset holds {len(dataset)}"
        )
    starts.append(len(dataset))
    return ShardTable(
        paths=ShardNames(tuple(path_index)),
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
        paths=ShardNames(paths),
        starts=np.append(first, len(dataset)).astype(np.int64),
        skips=np.append(records[first], 0).astype(np.int64),
        files=np.append(files[first], 0).astype(np.int64),
        sizes=sizes,
        root=local_root(dataset),
    )
