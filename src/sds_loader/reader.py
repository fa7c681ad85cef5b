"""BatchReader: a batch of ordinals in, one array per field out.

The reader is the face of the modules that do the work: its arguments are
checked in `reader_options`, a batch's layout is probed and confirmed in
`schema`, what it counts in `read_stats`, what a batch carries beside its
fields in `extras`, and what crosses a pickle in `pickled_state`. What
layers above may ask of it beyond reads is `dataset_protocol`'s.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
from signal_dataset.storage import ObjectStore

from sds_loader import batch_read, pickled_state, read_stats
from sds_loader.annotations import Annotations
from sds_loader.augment.chain import Chain
from sds_loader.augment.reading import Augmenter, BatchRead
from sds_loader.augment.transforms import Transform
from sds_loader.checksums import VerifyChecksums
from sds_loader.dataset import ShardTable
from sds_loader.extras import BatchExtras, Labels, names
from sds_loader.indices import normalize, normalize_one
from sds_loader.process_state import PerProcess, ProcessState
from sds_loader.read_stats import ReadStats
from sds_loader.reader_options import ReaderOptions, checked_epoch, checked_threads
from sds_loader.reader_options import default_threads as default_threads
from sds_loader.schema import Allocator, Layouts, Schema
from sds_loader.storage import sources
from sds_loader.windows import Window, batch_placement, window_crop

#: More threads than this are never started for one read (the native side takes a C int).
_MAX_THREADS = 1 << 10


class BatchReader:
    """Read batches of SDS records, verified and decoded, into one array per field.

    The native core groups a batch's ordinals by shard and chunk, checks
    every hash, decompresses each chunk once however many of its records
    were asked for, and writes each field straight into its row: Python is
    touched once per batch, not per record. docs/reading.md says what each
    argument does and costs; in short:

    - `fields=None` selects every field; `targets` are scalar metadata keys
      (strings become classes, see `labels`).
    - `threads` defaults to min(4, CPU count); in a DataLoader worker pass 1.
    - `window` (a `Window`) keeps `length` positions of one axis from a start
      per row, so records of different lengths batch together.
    - `verify_checksums`: True (every read), ``"once"`` (each chunk's first
      read in this process, see `sds_loader.checksums`) or False.
    - `max_open_files` and `max_chunk_bytes` bound descriptors and what one
      damaged chunk may make the reader allocate.
    - `object_store`, `requests_in_flight`, `connect_timeout`, `read_timeout`,
      `cache_dir` and `cache_limit` for shards in S3 or GCS
      (docs/object-storage.md, docs/node-cache.md).
    - `annotations`, `extras` and `labels`: what a batch carries beside its
      fields (docs/annotations.md).
    - `augment`: a `sds_loader.augment.Chain` (or a list of transforms) run
      natively on every row as it is read, its labels moved alike
      (docs/augmentation.md); `read(..., epoch=)` keys its draws.

    Shards the core cannot read are served by signal_dataset's reader in a
    helper process, with identical results (docs/formats.md).
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
        connect_timeout: float | None = None,
        read_timeout: float | None = None,
        annotations: Sequence[Annotations] = (),
        extras: Sequence[str] = (),
        labels: Mapping[str, Sequence[str]] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        cache_limit: int | str | None = None,
        augment: Chain | Sequence[Transform] | None = None,
    ) -> None:
        options = ReaderOptions.build(
            uri,
            fields=fields,
            targets=targets,
            threads=threads,
            verify_checksums=verify_checksums,
            max_open_files=max_open_files,
            max_chunk_bytes=max_chunk_bytes,
            object_store=object_store,
            window=window,
            requests_in_flight=requests_in_flight,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            annotations=annotations,
            extras=extras,
            labels=labels,
            cache_dir=cache_dir,
            cache_limit=cache_limit,
            augment=augment,
        )
        self._options = options
        self._threads = options.threads
        self._here = PerProcess()
        self.stats = ReadStats()
        self._labels = Labels(options.targets, options.labels)
        self._layouts = Layouts(
            uri=options.uri, fields=options.fields, window=options.window, labels=self._labels
        )
        self._extras = BatchExtras(options.annotations, self._labels, options.extras, options.window)
        # fields= and targets= are checked against record 0 here, so that a
        # typo fails in the constructor rather than in a DataLoader's worker.
        self._layouts.check_names(self.process_state(), self._fetched)
        if options.annotations:
            self._extras.check(self.process_state(), options.fields, len(self))
        self._augment = self._augmenter(options)

    def _augmenter(self, options: ReaderOptions) -> Augmenter | None:
        """The chain's runner, checked against record 0 (None without a chain, or an empty one:
        then every read is the plain one)."""
        chain = options.augment
        if chain is None or not chain.transforms:
            return None
        augmenter = Augmenter(chain, fields=options.fields, window=options.window)
        state = self.process_state()
        if len(state.dataset):
            augmenter.check(state, self._layouts.known(state, 0, self._fetched), options.annotations)
        return augmenter

    # -- this process's state (dataset_protocol.ProcessLocal) -----------------

    def process_state(self) -> ProcessState:
        """This process's open dataset, shards, source and native reader, opened on first use."""
        return self._here.get(self._options.open_state)

    def opened_state(self, *, inherited: bool = False) -> ProcessState | None:
        """This process's state if it is open already (never opening it), else None.

        With `inherited`, a forked process's copy of its parent's too: to look
        at what it learnt, never to read through (its descriptors are the parent's).
        """
        return self._here.opened(inherited=inherited)

    def shard_table(self) -> ShardTable | None:
        """Where this process's reader finds each record (None when signal_dataset reads them all).

        Samplers ask the reader rather than open the dataset again, which in
        object storage is several requests one after another.
        """
        return self.process_state().table

    _addressing = shard_table  # the name of earlier releases

    @property
    def stats(self) -> ReadStats:
        """What this reader did in this process; fetch counts include every byte fetched so far.

        Readahead fetches on threads of its own, so its counts are brought up
        to date whenever they are looked at, not only around reads.
        """
        state = self.opened_state()
        if state is not None:
            read_stats.count_fetches(self._stats, state)
        return self._stats

    @stats.setter
    def stats(self, stats: ReadStats) -> None:
        self._stats = stats

    def __getstate__(self) -> dict[str, object]:
        state = self.opened_state(inherited=True)
        return pickled_state.outgoing(
            self.__dict__,
            left_behind={
                "_options": self._options.portable(None if state is None else state.dataset.object_store)
            },
            opened=state.dataset if state is not None else None,
        )

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(pickled_state.incoming(state))

    # -- public surface -----------------------------------------------------

    @property
    def uri(self) -> str:
        return self._options.uri

    @property
    def threads(self) -> int:
        return self._threads

    @threads.setter
    def threads(self, value: int) -> None:
        self._threads = checked_threads(value)

    @property
    def window(self) -> Window | None:
        return self._options.window

    @property
    def object_store(self) -> ObjectStore:
        """The store this process's dataset was opened with."""
        return self.process_state().dataset.object_store

    @property
    def native_unavailable_reason(self) -> str | None:
        """Why every record goes through signal_dataset, or None when none must."""
        return self.process_state().native_reason

    @property
    def max_open_files(self) -> int:
        """Shards this reader keeps open at most (descriptors and mappings)."""
        return self._options.max_open_files

    @property
    def index_bytes(self) -> int:
        """Bytes this process keeps of the footers and indexes of the shards read so far."""
        native = self.process_state().native
        return 0 if native is None else int(native.index_bytes)

    @property
    def shards_indexed(self) -> int:
        """Shards whose footer and index this process has read (each once)."""
        native = self.process_state().native
        return 0 if native is None else int(native.shards_indexed)

    @property
    def schema(self) -> Schema:
        """The layout of the last batch read (probing the first record if none was)."""
        if self._layouts.last is None and len(self) == 0:
            raise ValueError(f"dataset {self.uri} holds no records")
        return self._layouts.known(self.process_state(), 0, self._fetched)

    @property
    def augment_keys(self) -> tuple[str, ...]:
        """The keys a batch gets from the augmentation chain (what it drew, the metadata it changed)."""
        return () if self._augment is None else self._augment.key_names()

    @property
    def labels(self) -> Mapping[str, tuple[str, ...]]:
        """The class names behind each string target, in index order."""
        return dict(self._labels.classes)

    def __len__(self) -> int:
        return len(self.process_state().dataset)

    def close(self) -> None:
        """Release this process's connections, helper process and open shards.

        A later read opens them again, so closing is always safe; a read in
        flight on another thread fails with StorageError rather than hang.
        """
        self._here.close()

    def __repr__(self) -> str:
        return (
            f"BatchReader({self.uri!r}, fields={self._options.fields!r}, "
            f"targets={self._labels.targets!r}, threads={self._threads})"
        )

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        """One record's selected fields and targets, without the batch axis.

        A ragged annotation field is the record's items whole (its offsets are
        left out), and ``id`` the record's id.
        """
        return self._extras.one_row(self.read([normalize_one(index, len(self))]))

    def read(
        self,
        indices: Iterable[int] | np.ndarray,
        out: Mapping[str, object] | None = None,
        *,
        starts: Iterable[int] | np.ndarray | None = None,
        allocator: Allocator | None = None,
        epoch: int = 0,
    ) -> dict[str, np.ndarray]:
        """Read `indices` (any order, repeats allowed) into one array per field.

        Row k of every array holds record `indices[k]`. With `out`, the
        caller's buffers are checked in full, then filled and returned (after
        a read that raises, their contents are undefined: checking every
        batch in scratch first would cost a pass over every byte);
        `allocator` supplies fresh buffers (shared or pinned memory, say).
        With a window, `starts` gives each row's first position along its
        axis (default: the window's crop with seed 0 and `epoch`). `epoch`
        also keys an augmentation chain's draws (with its seed and each
        record's ordinal): another epoch, another augmentation.
        """
        started = time.perf_counter()  # the stats' "python" stage starts here
        if epoch != 0:
            epoch = checked_epoch(epoch)
        state = self.process_state()
        ordinals = normalize(indices, len(state.dataset))
        window = self._options.window
        if self._augment is not None:
            if window is None and starts is not None:
                batch_placement(window, ordinals, starts, self._record_lengths)  # refuses them
            return self._augment.read(
                BatchRead(
                    state=state,
                    layouts=self._layouts,
                    extras=self._extras,
                    ordinals=ordinals,
                    starts=starts,
                    out=out,
                    allocator=allocator,
                    window=window,
                    epoch=epoch,
                    threads=min(self._threads, _MAX_THREADS),
                    stats=self._stats,
                    started=started,
                )
            )
        row_starts, window_length = batch_placement(
            window, ordinals, starts, self._record_lengths, epoch=epoch
        )
        arrays = batch_read.read_batch(
            state,
            self._layouts,
            ordinals,
            row_starts,
            out=out,
            allocator=allocator,
            window=window,
            window_length=window_length,
            threads=min(self._threads, _MAX_THREADS),
            stats=self._stats,
            started=started,
        )
        self._extras.add(arrays, ordinals, state, row_starts, window_length)
        return arrays

    def will_need(self, indices: Iterable[int] | np.ndarray, *, into_cache: bool = False) -> int:
        """Tell the storage that `indices` will be read soon; returns the bytes announced.

        Called with the next batch while this one decodes, it keeps a cold
        disk or a store busy between batches. With `into_cache`, object-store
        bytes go into the node cache only, for a process whose announcements
        serve other processes' reads. A hint never raises; the read does.
        docs/reading.md says what each kind of storage does with it.
        """
        state = self.opened_state()
        if state is None:
            if sources.is_remote(self.uri):
                return 0
            state = self.process_state()
        return batch_read.announce(state, normalize(indices, len(state.dataset)), into_cache=into_cache)

    def window_starts(
        self, indices: Iterable[int] | np.ndarray, *, seed: int = 0, epoch: int = 0
    ) -> np.ndarray:
        """The starts the window's crop picks for `indices` in `epoch` under `seed`.

        ``"random"`` is a function of (seed, epoch, ordinal) alone, so every
        process and rank picks the same. Record lengths come from the dataset's
        record metadata, not from reading records; under an augmentation chain
        that resamples, they are each record's length after the chain in `epoch`.
        """
        window = self._options.window
        if window is None:
            raise ValueError("this reader has no window; make it with window=sds_loader.Window(...)")
        ordinals = normalize(indices, len(self))
        augment = self._augment
        if augment is not None and augment.chain.resamples:
            state = self.process_state()
            drawn_epoch = checked_epoch(epoch)

            def final(asked: np.ndarray) -> np.ndarray:
                return augment.final_lengths(state, asked, drawn_epoch)

            return window_crop(window, ordinals, final, seed=seed, epoch=epoch)
        return window_crop(window, ordinals, self._record_lengths, seed=seed, epoch=epoch)

    def metadata(self, indices: Iterable[int] | np.ndarray, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """One array per metadata key over `indices`, from the metadata shards in one native read.

        bool, int64, float64 (integers mixed with floats), or an object array
        of str; ``np.flatnonzero(cols["split"] == "train")`` is a split. No data
        record is read. A missing key or a value of another kind raises
        `TargetError` naming the record.
        """
        ordinals = normalize(indices, len(self))
        return self.process_state().metadata.columns(ordinals, names("keys", keys))

    def annotation_values(self, indices: Iterable[int] | np.ndarray, name: str) -> list[dict[str, object]]:
        """Each row's ``status``, JSON ``values``, ``provenance`` and ``detail_status`` in set `name`.

        Decoded by signal_dataset's own annotation codec, one row at a time in
        Python: for inspection and bookkeeping, not a batch's hot path.
        """
        ordinals = normalize(indices, len(self))
        return self.process_state().annotations.values(name, ordinals)

    # -- internals ----------------------------------------------------------

    def _fetched(self) -> None:
        read_stats.count_fetches(self._stats, self.process_state())

    def _record_lengths(self, ordinals: np.ndarray) -> np.ndarray:
        window = self._options.window
        assert window is not None
        return self.process_state().metadata.lengths(ordinals, window.axis, self._options.fields)
