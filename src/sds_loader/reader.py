"""BatchReader: a batch of ordinals in, one array per field out."""

from __future__ import annotations

import json
import os
import threading
import time
import weakref
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
from signal_dataset import CorruptDatasetError
from signal_dataset.storage import ObjectStore

from sds_loader import read_stats
from sds_loader.annotations import Annotations
from sds_loader.checksums import VerifyChecksums, verify_checksums_setting
from sds_loader.dataset import ShardTable, adopt_tables, export_tables
from sds_loader.errors import MixedShapesError, SchemaMismatch
from sds_loader.extras import add_extras, annotation_specs, extra_names, given_labels, names
from sds_loader.file_budget import default_open_files
from sds_loader.indices import normalize, normalize_one
from sds_loader.process_state import ProcessState
from sds_loader.read_stats import ReadStats
from sds_loader.schema import (
    Allocator,
    FieldSpec,
    Schema,
    adopt,
    allocate,
    check_no_clash,
    native_layout,
    select_fields,
    target_spec,
    uniform_schema,
    window_axes,
    windowed_fields,
)
from sds_loader.storage import sources
from sds_loader.storage.node_cache import cache_settings
from sds_loader.storage.stores import portable
from sds_loader.windows import Window, crop_starts, normalize_starts

#: More threads than this are never started for one read (the native side takes a C int).
_MAX_THREADS = 1 << 10


#: Every live reader, so that a forked child can give each a fresh lock.
_READERS: weakref.WeakSet[BatchReader] = weakref.WeakSet()


def _fresh_locks_after_fork() -> None:
    # A thread of the parent may have held a reader's lock (opening its
    # dataset) at the instant of the fork; that thread does not exist in the
    # child, so the copy of its lock would never be released.
    for reader in list(_READERS):
        reader._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fresh_locks_after_fork)


def default_threads() -> int:
    return max(1, min(4, os.cpu_count() or 1))


class BatchReader:
    """Read batches of SDS records, verified and decoded, into one array per field.

    The native core groups a batch's ordinals by shard and chunk, reads each run
    of adjacent chunks in one copy (from a mapping of the shard while it is in
    the page cache, with `preadv` from the disk), checks every hash,
    decompresses each chunk once however many of its records were asked for,
    and writes every selected field straight into its row of the output.
    Python is touched once per batch, not per record.

    `fields=None` selects every field of the first record read. `targets` are
    scalar keys of each record's metadata (such as ``"label"``), returned as
    int64 when the first record holds an integer or bool and float64 otherwise.
    `threads` defaults to min(4, CPU count); a DataLoader worker should pass 1,
    since the workers are already the parallelism.

    `window` (a `Window`) keeps `length` positions of one named axis of every
    selected field that carries it, from a start per index (``read(indices,
    starts=...)``); records of different lengths along that axis then batch
    together. What a window costs depends on the shard:

    - uncompressed: only the window's bytes are read (one run per position of
      the axes before the window's axis), when `verify_checksums` is off or
      once this process has verified the record's chunk; the first read of a
      chunk verifies it whole, since a hash covers the whole chunk.
    - zstd: decompression stops at the window's end. The record's descriptor,
      stored after the tensors, is then not read: each field's tensor is the
      one the SafeTensors header shows with the batch's dtype and shape, as
      signal_dataset names them. Requesting targets, which live in the
      descriptor, decompresses the whole record.
    - snappy, brotli, grouped chunks: the whole chunk is decoded as without a
      window, and only the window is copied.

    `verify_checksums` is True (every read checks every hash), ``"once"``
    (each chunk is checked on its first read in this process and trusted
    after while its shard is the same file: see `sds_loader.checksums`) or
    False (nothing is checked).

    What each shard's footer and index say is kept for every shard touched, a
    few bytes a record (`index_bytes`), so no shard is parsed twice. At most
    `max_open_files` shards stay open (a descriptor and a mapping each); the
    default follows the process's file limit (see `sds_loader.file_budget`).
    A damaged shard cannot make the reader allocate more than its bytes can
    decode to; `max_chunk_bytes` (default 2 GiB) caps, besides, what one
    chunk or record may decode to, per decoding thread.

    Shards in S3 (or any S3-compatible store) are read natively too: the same
    plan, then only the byte ranges it needs, as ranged GETs, up to
    `requests_in_flight` at once per read (default 64). The store's
    settings are signal_dataset's own: `object_store` is passed to
    `signal_dataset.open`, and by default the store comes from signal_dataset's
    registry, as it does for `signal_dataset.open(uri)`.

    `cache_dir` keeps what is fetched from S3 or GCS on this machine's disk:
    later reads of those bytes (the next epoch) are served from there, each
    64 KiB block's hash checked, and every process given the same directory
    (DataLoader workers, ranks) shares it, fetching each byte once between
    them. `cache_limit` (bytes, or a string such as ``"200GB"``) bounds it;
    by default it may take half the disk's free space. See docs/node-cache.md.

    A reference dataset (a published `DatasetView`) is read natively from the
    shards its manifests name. Shards the native core cannot read (transposed
    chunks, stores it has no source for) are served by signal_dataset's reader, in a helper
    process, with identical results; `stats` counts which path served each
    record.
    """

    def __init__(
        self,
        uri: str,
        *,
        fields: Sequence[str] | None = None,
        targets: Sequence[str] = (),
        threads: int | None = None,
        verify_checksums: VerifyChecksums = True,
        max_open_files: int | None = None,
        max_chunk_bytes: int | None = None,
        object_store: ObjectStore | None = None,
        window: Window | None = None,
        requests_in_flight: int | None = None,
        annotations: Sequence[Annotations] = (),
        extras: Sequence[str] = (),
        labels: Mapping[str, Sequence[str]] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        cache_limit: int | str | None = None,
    ) -> None:
        if not isinstance(uri, str | os.PathLike):
            raise TypeError(f"uri must be a path or URI string, not {type(uri).__name__}")
        self._uri = os.fspath(uri)
        self._fields = names("fields", fields) if fields is not None else None
        self._targets = names("targets", targets)
        if threads is None:
            threads = default_threads()
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be a positive integer, not {threads!r}")
        if max_chunk_bytes is not None and (
            isinstance(max_chunk_bytes, bool) or not isinstance(max_chunk_bytes, int) or max_chunk_bytes < 1
        ):
            raise ValueError(f"max_chunk_bytes must be a positive integer or None, not {max_chunk_bytes!r}")
        self._max_chunk_bytes = max_chunk_bytes
        if max_open_files is None:
            max_open_files = default_open_files()
        if isinstance(max_open_files, bool) or not isinstance(max_open_files, int) or max_open_files < 1:
            raise ValueError(f"max_open_files must be a positive integer or None, not {max_open_files!r}")
        if window is not None and not isinstance(window, Window):
            raise TypeError(f"window must be a sds_loader.Window, not {type(window).__name__}")
        self._window = window
        self._threads = threads
        self._verify = verify_checksums_setting(verify_checksums)
        self._max_open_files = max_open_files
        if requests_in_flight is not None and (
            isinstance(requests_in_flight, bool)
            or not isinstance(requests_in_flight, int)
            or requests_in_flight < 1
        ):
            raise ValueError(
                f"requests_in_flight must be a positive integer or None, not {requests_in_flight!r}"
            )
        self._requests_in_flight = requests_in_flight
        self._cache = cache_settings(cache_dir, cache_limit)
        self._object_store = object_store
        self._schema: Schema | None = None
        self._lock = threading.Lock()
        _READERS.add(self)
        self._state: ProcessState | None = None
        self.stats = ReadStats()
        self._annotation_specs = annotation_specs(annotations)
        self._extras = extra_names(extras, window)
        self._classes: dict[str, tuple[str, ...]] = {}
        self._label_keys: tuple[str, ...] = ()
        self._split_label_targets(labels)
        self._checknames()
        self._check_annotations()

    def _checknames(self) -> None:
        """Check fields= and targets= against record 0, so a typo fails here, not in a worker.

        Safe before forking DataLoader workers whatever the dataset: records
        only signal_dataset can read are read in a helper process. A corrupt
        record 0 is left to the first batch that holds it, so that the rest
        of its dataset stays readable. A reader that names nothing reads no
        record here.
        """
        if len(self._process().dataset) == 0:
            return
        if self._fields is None and not self._targets and self._window is None:
            # Nothing to check: the first batch learns the layout from its own
            # first record, once the shards it touches are open (in object
            # storage, all in one round trip and without reading record 0).
            return
        try:
            self._schema = self._probe(0)
        except CorruptDatasetError:
            pass

    # -- process-local state ------------------------------------------------

    def _process(self) -> ProcessState:
        state = self._state
        if state is None or state.pid != os.getpid():
            with self._lock:
                state = self._state
                if state is None or state.pid != os.getpid():
                    state = ProcessState(
                        self._uri,
                        self._object_store,
                        self._verify,
                        self._max_open_files,
                        self._requests_in_flight,
                        self._cache,
                    )
                    if state.native is not None and self._max_chunk_bytes is not None:
                        state.native.max_chunk_bytes = self._max_chunk_bytes
                    self._state = state
        return state

    @property
    def stats(self) -> ReadStats:
        """What this reader did in this process; fetch counts include every byte fetched so far.

        The source fetches on threads of its own (readahead, announcements), so
        the fetch counts are brought up to date whenever they are looked at,
        not only around reads: bytes read ahead and never read are counted too.
        """
        state = self._state
        if state is not None and state.pid == os.getpid():
            self._count_fetches(state)
        return self._stats

    @stats.setter
    def stats(self, stats: ReadStats) -> None:
        self._stats = stats

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        state["_state"] = None
        state["_lock"] = None
        # The store's settings, not the store: a spawned process cannot unpickle
        # a client, and needs the endpoint even when it came from this
        # process's registry.
        live = self._state.dataset.object_store if self._state is not None else None
        state["_object_store"] = portable(self._object_store if self._object_store is not None else live)
        # The shard tables go along (a few dozen bytes a shard), so that a
        # spawned worker does not read every manifest page again.
        state["_tables"] = export_tables(self._state.dataset) if self._state is not None else {}
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        tables = state.pop("_tables", None)
        if isinstance(tables, dict):
            adopt_tables(tables)
        self.__dict__.update(state)
        self._lock = threading.Lock()
        _READERS.add(self)

    # -- public surface -----------------------------------------------------

    @property
    def uri(self) -> str:
        return self._uri

    def _addressing(self) -> ShardTable | None:
        """Where this process's reader finds each record (None when signal_dataset reads them all).

        For `ShardAwareSampler`, which would otherwise open the dataset again to
        learn it: in object storage that is several requests one after another.
        """
        return self._process().table

    @property
    def threads(self) -> int:
        return self._threads

    @threads.setter
    def threads(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"threads must be a positive integer, not {value!r}")
        self._threads = value

    @property
    def window(self) -> Window | None:
        return self._window

    @property
    def object_store(self) -> ObjectStore:
        """The store this process's dataset was opened with."""
        return self._process().dataset.object_store

    @property
    def native_unavailable_reason(self) -> str | None:
        """Why every record goes through signal_dataset, or None when none must."""
        return self._process().native_reason

    @property
    def max_open_files(self) -> int:
        """Shards this reader keeps open at most (descriptors and mappings)."""
        return self._max_open_files

    @property
    def index_bytes(self) -> int:
        """Bytes this process keeps of the footers and indexes of the shards read so far."""
        native = self._process().native
        return 0 if native is None else int(native.index_bytes)

    @property
    def shards_indexed(self) -> int:
        """Shards whose footer and index this process has read (each once)."""
        native = self._process().native
        return 0 if native is None else int(native.shards_indexed)

    @property
    def schema(self) -> Schema:
        """The layout of the last batch read (probing the first record if none was)."""
        if self._schema is None:
            if len(self) == 0:
                raise ValueError(f"dataset {self._uri} holds no records")
            self._schema = self._probe(0)
        return self._schema

    def __len__(self) -> int:
        return len(self._process().dataset)

    def close(self) -> None:
        """Release this process's connections, helper process and open shards.

        A later read opens them again, so closing is always safe; a read in
        flight on another thread fails with StorageError rather than hang.
        """
        with self._lock:
            state, self._state = self._state, None
        if state is not None and state.pid == os.getpid():
            state.close()

    def __repr__(self) -> str:
        return (
            f"BatchReader({self._uri!r}, fields={self._fields!r}, targets={self._targets!r}, "
            f"threads={self._threads})"
        )

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        """One record's selected fields and targets, without the batch axis.

        A ragged annotation field is the record's items whole (its offsets are
        left out), and ``id`` the record's id.
        """
        ordinal = normalize_one(index, len(self))
        if self._window is not None or self._annotation_specs or self._label_keys or self._extras:
            batch = self.read([ordinal])
            ragged = {
                key
                for spec in self._annotation_specs
                if spec.max_items is None
                for key in spec.keys()
                if not key.endswith(".status")
            }
            return {
                name: array if name in ragged else array[0]
                for name, array in batch.items()
                if not name.endswith(".offsets") or name not in ragged
            }
        schema = self._probe(ordinal)
        arrays = allocate(schema, 1)
        try:
            self._read_into(np.asarray([ordinal], dtype=np.int64), schema, arrays)
        except SchemaMismatch as mismatch:
            raise MixedShapesError(f"{mismatch}; probed layout {schema.describe()}") from None
        return {name: array[0] for name, array in arrays.items()}

    def read(
        self,
        indices: Iterable[int] | np.ndarray,
        out: Mapping[str, object] | None = None,
        *,
        starts: Iterable[int] | np.ndarray | None = None,
        allocator: Allocator | None = None,
    ) -> dict[str, np.ndarray]:
        """Read `indices` (any order, repeats allowed) into one array per field.

        Row k of every array holds record `indices[k]`. With `out`, the caller's
        buffers are checked in full before any byte is written, then filled and
        returned; `allocator` instead supplies fresh buffers (shared or pinned
        memory, say) when the reader allocates.

        When the read raises (a corrupt record, say), `out` buffers that passed
        the checks may already hold some rows, and the failing record's row may
        be partly written: their contents are undefined until a read into them
        succeeds. Avoiding that would mean decoding every batch into scratch
        first and copying it, which costs a pass over every byte read.

        With a window, `starts` gives each row's first position along the
        window's axis (default: the window's crop, with seed 0 and epoch 0;
        see `window_starts`). A start outside its record, or without padding a
        window past its end, raises IndexError naming the record.
        """
        started = time.perf_counter()  # the stats' "python" stage starts here
        ordinals = normalize(indices, len(self))
        window = self._window
        if starts is not None and window is None:
            raise ValueError(
                "starts= places a window, and this reader has none; make it with "
                "window=sds_loader.Window(axis, length)"
            )
        row_starts: np.ndarray | None = None
        if window is not None:
            row_starts = (
                normalize_starts(starts, ordinals.size)
                if starts is not None
                else self._crop(ordinals, seed=0, epoch=0)
            )
        schema = self._schema
        if schema is None:
            if len(self) == 0:
                raise ValueError(
                    f"dataset {self._uri} holds no records, so a batch of it has no fields to return"
                )
            state = self._process()
            if ordinals.size and state.table is not None:
                # The probe reads the batch's first record: open its shard with the others.
                files, records = state.table.locate(ordinals)
                self._open_shards(state, files)
                if state.source is not None and state.native is not None:
                    # In object storage, the batch's chunks are asked for now,
                    # all at once: the probe then waits for its record's chunk
                    # among them instead of taking a round trip of its own.
                    from sds_loader import _native

                    _native.hint_records(state.native, files, records)
            schema = self._probe(int(ordinals[0]) if ordinals.size else 0)

        window_length = self._batch_window_length(ordinals, row_starts)

        def buffers(layout: Schema) -> dict[str, np.ndarray]:
            if window_length is not None:
                layout = layout.windowed(window_length)
            if out is not None:
                return adopt(out, layout, ordinals.size)
            try:
                return allocate(layout, ordinals.size, allocator)
            except (ValueError, MemoryError) as exc:
                if window_length is None or allocator is not None:
                    raise
                raise ValueError(
                    f"window={self._window!r} asks for rows of {window_length} positions: a batch of "
                    f"{ordinals.size} with them cannot be allocated ({exc}); pass a Window of a "
                    "length the records can hold"
                ) from None

        arrays = buffers(schema)
        if ordinals.size == 0:
            self._add_extras(
                arrays, ordinals, None if row_starts is None else np.asarray(row_starts), window_length
            )
            return arrays
        try:
            self._read_into(ordinals, schema, arrays, row_starts, batches=1, started=started)
        except SchemaMismatch:
            started = time.perf_counter()  # the failed read's time is counted already
            self._stats._add(schema_retries=1)
            schema = self._uniform_schema(ordinals)
            arrays = buffers(schema)
            try:
                self._read_into(ordinals, schema, arrays, row_starts, batches=1, started=started)
            except SchemaMismatch as again:
                # Every record agreed when probed one by one, yet not when read
                # together: report it as the layout problem it is.
                raise MixedShapesError(f"{again}; batch layout {schema.describe()}") from None
        self._schema = schema
        self._add_extras(
            arrays, ordinals, None if row_starts is None else np.asarray(row_starts), window_length
        )
        return arrays

    def will_need(self, indices: Iterable[int] | np.ndarray, *, into_cache: bool = False) -> int:
        """Tell the storage that `indices` will be read soon; returns the bytes announced.

        For shards in local files the kernel is asked to start reading the
        chunks that hold these records (``posix_fadvise(WILLNEED)``, from a
        native thread of the reader's, since the kernel allocates the pages
        before it returns) and the call returns at once, so a later `read`
        of them finds their pages in the page cache, or on their way there.
        Called with the *next* batch while this one decodes, it keeps a cold
        disk busy instead of idle between batches; `ShardAwareSampler` does
        so. On a warm cache it costs a page-cache lookup per page. While 64
        announcements wait for that thread, more are dropped. Whole chunks
        are announced, also under a window that reads part of one.

        For object storage the announcement goes to a background thread of
        the reader's, which opens the shards and fetches their chunks into a
        small cache (32 MiB) that later reads use; the call returns 0 at
        once, before any request is made. A reader not yet opened in this
        process (closed, or just forked) drops the announcement rather than
        open its dataset on the caller's thread. Shards the core cannot read
        take no hints, and return 0.

        With `into_cache` and a node cache (`cache_dir`), the announced bytes
        go into the node cache only, not into this reader's memory too: for
        a process whose announcements serve other processes' reads, such as
        the main process of a DataLoader whose workers read the batches.

        A hint never raises for a record that cannot be read, nor for a
        store that cannot be reached: the read of it does.
        """
        state = self._state
        if state is None or state.pid != os.getpid():
            if sources.is_remote(self._uri):
                return 0
            state = self._process()
        ordinals = normalize(indices, len(state.dataset))
        if state.native is None or ordinals.size == 0:
            return 0
        from sds_loader import _native

        assert state.table is not None
        files, records = state.table.locate(ordinals)
        if state.source is not None:
            state.source.readahead_into_cache(into_cache)
            state.readahead().announce(files, records)
            return 0
        return int(_native.hint_records(state.native, files, records))

    def window_starts(
        self, indices: Iterable[int] | np.ndarray, *, seed: int = 0, epoch: int = 0
    ) -> np.ndarray:
        """The starts the window's crop picks for `indices` in `epoch` under `seed`.

        ``"random"`` is a function of (seed, epoch, ordinal) alone, so every
        process and rank picks the same. Record lengths come from the dataset's
        record metadata, not from reading records.
        """
        if self._window is None:
            raise ValueError("this reader has no window; make it with window=sds_loader.Window(...)")
        return self._crop(normalize(indices, len(self)), seed=seed, epoch=epoch)

    @property
    def labels(self) -> Mapping[str, tuple[str, ...]]:
        """The class names behind each string target, in index order."""
        return dict(self._classes)

    def metadata(self, indices: Iterable[int] | np.ndarray, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """One array per metadata key over `indices`, from the metadata shards in one native read.

        bool, int64, float64 (integers mixed with floats), or an object array
        of str; ``np.flatnonzero(cols["split"] == "train")`` is a split. No data
        record is read. A missing key or a value of another kind raises
        `TargetError` naming the record.
        """
        ordinals = normalize(indices, len(self))
        return self._process().metadata.columns(ordinals, names("keys", keys))

    def annotation_values(self, indices: Iterable[int] | np.ndarray, name: str) -> list[dict[str, object]]:
        """Each row's ``status``, JSON ``values``, ``provenance`` and ``detail_status`` in set `name`.

        Decoded by signal_dataset's own annotation codec, one row at a time in
        Python: for inspection and bookkeeping, not a batch's hot path.
        """
        ordinals = normalize(indices, len(self))
        return self._process().annotations.values(name, ordinals)

    # -- internals ----------------------------------------------------------

    def _split_label_targets(self, labels: Mapping[str, Sequence[str]] | None) -> None:
        """Targets whose values are strings become class indices; learn their classes once."""
        given = given_labels(labels, self._targets)
        self._promote_labels(given, given)

    def _promote_labels(self, keys: Iterable[str], given: Mapping[str, tuple[str, ...]]) -> None:
        """Read `keys` as class labels instead of numeric targets, learning classes not given.

        Keys whose values are strings are found in the record the reader
        probes for its layout (record 0, when the reader is made), so that a
        reader of numeric targets reads nothing more than before.
        """
        promoted = [key for key in self._targets if key in set(keys)]
        if not promoted:
            return
        self._label_keys = (*self._label_keys, *promoted)
        self._targets = tuple(key for key in self._targets if key not in promoted)
        for key in promoted:
            if key in given:
                self._classes[key] = given[key]
            else:
                self._classes[key] = self._process().metadata.distinct(key, len(self))

    def _check_annotations(self) -> None:
        """Sets and fields named by annotations= exist, checked here rather than in a worker."""
        if not self._annotation_specs or len(self) == 0:
            return
        taken = set(self._targets) | set(self._label_keys) | set(self._extras)
        if self._fields is not None:
            taken |= set(self._fields)
        source = self._process().annotations
        for spec in self._annotation_specs:
            for key in spec.keys():
                if key in taken:
                    raise ValueError(f"annotations= returns {key!r}, which another output already names")
            rows = source.read(spec.name, np.zeros(1, dtype=np.int64), spec.fields)
            del rows
            if spec.positions and self._window is not None:
                for item, axis in spec.positions.items():
                    if axis != self._window.axis:
                        raise ValueError(
                            f"Annotations({spec.name!r}) positions[{item!r}] is along {axis!r}, and the "
                            f"window is along {self._window.axis!r}; its items would not be clipped"
                        )

    def _add_extras(
        self,
        arrays: dict[str, np.ndarray],
        ordinals: np.ndarray,
        starts: np.ndarray | None,
        window_length: int | None,
    ) -> None:
        """Annotation sets, string labels and provenance, beside the records' arrays."""
        if not (self._annotation_specs or self._label_keys or self._extras):
            return
        add_extras(
            arrays,
            ordinals,
            self._process(),
            annotations=self._annotation_specs,
            labels={key: self._classes[key] for key in self._label_keys},
            extras=self._extras,
            window=self._window,
            starts=starts,
            window_length=window_length,
        )

    def _crop(self, ordinals: np.ndarray, *, seed: int, epoch: int) -> np.ndarray:
        window = self._window
        assert window is not None
        if window.crop == "start" or window.crop_length is None:
            return np.zeros(ordinals.size, dtype=np.int64)
        lengths = self._record_lengths(ordinals)
        return crop_starts(window.crop, window.crop_length, lengths, ordinals, seed=seed, epoch=epoch)

    def _record_lengths(self, ordinals: np.ndarray) -> np.ndarray:
        window = self._window
        assert window is not None
        return self._process().metadata.lengths(ordinals, window.axis, self._fields)

    def _batch_window_length(self, ordinals: np.ndarray, starts: np.ndarray | None) -> int | None:
        """The window's length for this batch: fixed, or the longest row (length=None),
        rounded up to its boundary when the window has boundaries."""
        window = self._window
        if window is None:
            return None
        if window.length is not None:
            return window.length
        if ordinals.size == 0:
            return 0
        assert starts is not None
        lengths = self._record_lengths(ordinals)
        outside = (starts < 0) | (starts >= lengths)
        if outside.any():
            k = int(np.argmax(outside))
            raise IndexError(
                f"record {int(ordinals[k])}: window start {int(starts[k])} is outside its "
                f"{int(lengths[k])} positions along axis {window.axis!r}; pass a start from 0 "
                f"to {max(int(lengths[k]) - 1, 0)}"
            )
        return window.batch_length(lengths - starts, ordinals)

    def _window_axes(self, ordinal: int, names: Sequence[str] | None = None) -> dict[str, int]:
        """Where the window's axis sits in each selected field of record `ordinal` that has it."""
        assert self._window is not None
        layout = self._process().metadata.layouts(np.asarray([ordinal], dtype=np.int64))[0]
        return window_axes(layout, self._window.axis, tuple(names) if names is not None else self._fields)

    def _read_into(
        self,
        ordinals: np.ndarray,
        schema: Schema,
        arrays: dict[str, np.ndarray],
        starts: np.ndarray | None = None,
        *,
        batches: int = 0,
        started: float | None = None,
    ) -> None:
        """Fill `arrays`; the stats count the records, and `batches` more batches, once it
        succeeds, and the read's stage times (Python's since `started`, else since now)."""
        if started is None:
            started = time.perf_counter()
        state = self._process()
        pad = self._window is not None and self._window.pad
        if state.native is None:
            state.fallback.fill(ordinals, np.arange(ordinals.size), schema, arrays, starts, pad)
            self._stats._add(fallback_records=int(ordinals.size), batches=batches)
            with read_stats.lock():
                self._stats._stage[-1] += time.perf_counter() - started
            return
        assert state.table is not None
        files, locals_ = state.table.locate(ordinals)
        # Built once per schema, in this process: a batch passes only its arrays.
        layout = state.layout
        if layout is None or layout[0] is not schema:
            layout = state.layout = (schema, native_layout(schema))
        self._open_shards(state, files)
        helped = state.native.helped_batches
        try:
            needs_fallback = state.native.read(
                files,
                locals_,
                ordinals,
                layout[1],
                arrays,
                min(self._threads, _MAX_THREADS),
                starts,
                pad,
            )
        except BaseException:
            self._count_fetches(state)
            self._stats._add(helped_batches=state.native.helped_batches - helped)
            with read_stats.lock():
                state.native.add_stage_seconds(self._stats._stage, time.perf_counter() - started)
            raise
        self._count_fetches(state)
        # Another thread's read may land in between: a count for tests that
        # read from one thread.
        helped = state.native.helped_batches - helped
        # The array's own nonzero(): flatnonzero and any() each pass through
        # Python wrappers that cost more than a small batch's bookkeeping.
        positions = needs_fallback.nonzero()[0]
        fallback_records = int(positions.size)
        if fallback_records:
            try:
                state.fallback.fill(
                    ordinals[positions],
                    positions,
                    schema,
                    arrays,
                    None if starts is None else starts[positions],
                    pad,
                )
            except BaseException:
                self._stats._add(helped_batches=helped)
                raise
        # One update (one lock) a batch, written out rather than through
        # _add's keywords: a batch of a few short records is read in tens of
        # microseconds, and each update cost one or two.
        stats = self._stats
        with read_stats.lock():
            stats.helped_batches += helped
            stats.fallback_records += fallback_records
            stats.native_records += int(ordinals.size) - fallback_records
            stats.batches += batches
            state.native.add_stage_seconds(stats._stage, time.perf_counter() - started)

    def _open_shards(self, state: ProcessState, files: np.ndarray) -> None:
        """Open the new shards among `files` together: in object storage one round
        trip for all of them, rather than one each as the core plans the batch."""
        if state.source is None:
            return
        try:
            state.source.open_shards(np.unique(files).tolist())
        finally:
            self._count_fetches(state)

    def _count_fetches(self, state: ProcessState) -> None:
        # What the source fetched since the last count, whichever read it was
        # for: with reads on several threads, a difference taken around each
        # read would count the others' requests too.
        if state.source is None:
            return  # local shards: nothing is fetched, and the lock is not free
        stats = self._stats
        with read_stats.lock():
            requests, fetched = state.fetched()
            counted, state.counted = state.counted, (requests, fetched)
            stats.fetch_requests += requests - counted[0]
            stats.fetched_bytes += fetched - counted[1]
            cache = state.source.cache_counters
            now = (cache.hits, cache.misses, cache.hit_bytes)
            before, state.cache_counted = state.cache_counted, now
            stats.cache_hits += now[0] - before[0]
            stats.cache_misses += now[1] - before[1]
            stats.cache_hit_bytes += now[2] - before[2]
        state.source.check_cache()

    def _probe(self, ordinal: int) -> Schema:
        """Learn one record's layout: its fields' dtypes and shapes, its targets' kinds."""
        state = self._process()
        probed = None
        if state.native is not None:
            assert state.table is not None
            files, locals_ = state.table.locate(np.asarray([ordinal], dtype=np.int64))
            try:
                probed = state.native.probe(int(files[0]), int(locals_[0]), ordinal)
            finally:
                self._count_fetches(state)
        if probed is not None:
            raw_fields, metadata_json = probed
            available = tuple(
                FieldSpec(name=name, tensor=key, dtype_name=dtype, shape=tuple(shape))
                for name, key, dtype, shape in raw_fields
            )
            metadata = json.loads(metadata_json)
        else:
            available, metadata = state.fallback.probe(ordinal)
        fields = select_fields(available, self._fields, ordinal=ordinal, uri=self._uri)
        self._promote_labels([key for key in self._targets if isinstance(metadata.get(key), str)], {})
        check_no_clash(fields, self._targets)
        lengths: tuple[str, ...] = ()
        if self._window is not None:
            axes = self._window_axes(ordinal, [spec.name for spec in fields])
            fields, lengths = windowed_fields(fields, axes, pad=self._window.pad, targets=self._targets)
        return Schema(
            fields=fields,
            targets=tuple(
                target_spec(key, metadata, ordinal=ordinal, uri=self._uri) for key in self._targets
            ),
            lengths=lengths,
        )

    def _uniform_schema(self, ordinals: np.ndarray) -> Schema:
        """The one layout every record of this batch shares, or MixedShapesError."""
        return uniform_schema({ordinal: self._probe(ordinal) for ordinal in np.unique(ordinals).tolist()})
