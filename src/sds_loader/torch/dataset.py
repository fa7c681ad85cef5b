"""`SDSTorchDataset`: the map-style dataset a DataLoader reads, a batch at a time.

A drop-in for the adapter in signal_dataset's PyTorch guide: ``dataset[i]``
returns the same keys, dtypes, shapes and values. What changes is
underneath: a DataLoader asks ``__getitems__`` for a whole batch of indices,
and that is one native read straight into the batch's final tensors (shared,
pinned, or a worker's ring of shared memory: `buffers`, `ring`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import cast

import numpy as np
import torch as _torch
from signal_dataset.storage import ObjectStore
from torch.utils.data import Dataset as _Dataset
from torch.utils.data import get_worker_info as _get_worker_info

from sds_loader import pickled_state
from sds_loader.annotations import Annotations
from sds_loader.augment.chain import Chain, chain_setting
from sds_loader.augment.transforms import Transform
from sds_loader.checksums import VerifyChecksums, verify_checksums_setting
from sds_loader.dataset import ShardTable
from sds_loader.errors import UnknownNameError, UnknownTargetError
from sds_loader.read_stats import ReadStats
from sds_loader.reader import BatchReader
from sds_loader.schema import Allocator
from sds_loader.storage.timeouts import Timeouts
from sds_loader.torch import readahead_route
from sds_loader.torch.batch import Batch
from sds_loader.torch.buffers import BufferSource, PagePool, PinnedSource, read_tensors
from sds_loader.torch.extras import Kind, extra_kinds
from sds_loader.torch.filled_rows import mask_padding_rows
from sds_loader.torch.profiling import read_batch_range
from sds_loader.torch.ring import DEFAULT_BLOCKS, WorkerRing, _Block
from sds_loader.torch.shared_epoch import SharedEpoch
from sds_loader.torch.worker_stats import DatasetStats, WorkerStatsBoard
from sds_loader.windows import Window, length_key


class _ProcessLocal:
    """The reader and buffer source of one process; never pickled, never inherited."""

    __slots__ = ("pid", "reader", "source", "in_worker")

    def __init__(self, pid: int, reader: BatchReader, source: BufferSource, in_worker: bool) -> None:
        self.pid = pid
        self.reader = reader
        self.source = source
        self.in_worker = in_worker


class SDSTorchDataset(_Dataset[dict[str, _torch.Tensor]]):
    """Map-style dataset of SDS records as dicts of tensors, read a batch at a time.

    ``dataset[i]`` is ``{"inputs": <field "samples">, "target": <metadata
    "label">}`` by default, exactly as signal_dataset's guide adapter returns
    it: the field's dtype and shape, and the target as a 0-d int64 tensor
    (float64 for a float). Name other sources with `inputs` and `target`
    (``None`` drops that key), and add keys with `fields` (output key to SDS
    field) and `targets` (output key to metadata key); an entry there under
    ``"inputs"`` or ``"target"`` replaces the default::

        SDSTorchDataset(uri, fields={"aux": "other"}, targets={"snr": "snr_db"})
        # -> {"inputs": samples, "aux": other, "target": label, "snr": snr_db}

    `threads` is the native reader's thread count; by default min(4, CPUs) in
    the main process and 1 in a DataLoader worker, where the workers already
    are the parallelism. `pin_memory=True` makes main-process batches
    page-locked when CUDA is available, so DataLoader's ``pin_memory=True``
    step copies nothing; pass both. `object_store`, `requests_in_flight`,
    `connect_timeout`, `read_timeout`, `cache_dir` and `cache_limit` go to
    `BatchReader` (a dataset in object
    storage; every worker given the same `cache_dir` shares its node cache,
    and so does every `Mixture` member given it).

    In a worker, batches go into a ring of `worker_blocks` shared-memory
    blocks (see `sds_loader.torch.ring`), each reused once the main process
    has dropped every tensor of its last batch: a worker holds at most that
    many batches' worth of memory beyond what the training loop keeps. 0
    gives every batch a fresh block, as torch does by default.

    The live reader is process-local: pickling drops it and a process whose
    PID differs from the opener's (a forked worker) opens its own, so fork and
    spawn workers, persistent or not, all work.

    `window` (a `sds_loader.Window`) cuts every field that carries its axis to
    the window, so captures of any length batch together::

        SDSTorchDataset(uri, window=Window("time", 4096, crop="random", pad=True), seed=0)

    Each record's start follows the window's crop: ``"start"``, ``"center"``,
    or ``"random"``, a function of (`seed`, epoch, ordinal) alone, so every
    worker and rank crops alike and `set_epoch` moves every record's window,
    in persistent workers too. With ``pad=True`` items and batches carry
    ``<key>_length`` (``inputs_length``): the valid positions of each row.

    `augment` (a `sds_loader.augment.Chain`, or a list of transforms) runs
    on every row as it is read, keyed by the chain's seed (this dataset's
    `seed` when the chain has none), the epoch `set_epoch` sets, and each
    record's ordinal: every worker, rank and resume sees the same
    augmentation of a record in an epoch. Batches carry what was drawn
    (``augment.<position>.<kind>.<parameter>``).
    """

    def __init__(
        self,
        uri: str | os.PathLike[str],
        *,
        inputs: str | None = "samples",
        target: str | None = "label",
        fields: Mapping[str, str] | None = None,
        targets: Mapping[str, str] | None = None,
        threads: int | None = None,
        pin_memory: bool = False,
        verify_checksums: VerifyChecksums = True,
        window: Window | None = None,
        seed: int = 0,
        worker_blocks: int = DEFAULT_BLOCKS,
        object_store: ObjectStore | None = None,
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
        if not isinstance(uri, str | os.PathLike):
            raise TypeError(f"uri must be a path or URI string, not {type(uri).__name__}")
        self._uri = os.fspath(uri)
        self._cache_dir = cache_dir
        self._cache_limit = cache_limit
        self._annotations = (annotations,) if isinstance(annotations, Annotations) else tuple(annotations)
        self._extras = (extras,) if isinstance(extras, str) else tuple(extras)
        self._labels = labels
        self._fields = _key_map("fields", "inputs", inputs, fields)
        self._targets = _key_map("targets", "target", target, targets)
        _check_disjoint(self._fields, self._targets)
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ValueError(f"threads must be a positive integer or None, not {threads!r}")
        self._threads = threads
        self._pin_memory = bool(pin_memory)
        self._verify = verify_checksums_setting(verify_checksums)
        if window is not None and not isinstance(window, Window):
            raise TypeError(f"window must be a sds_loader.Window, not {type(window).__name__}")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, not {seed!r}")
        self._window = window
        self._seed = seed
        chain = chain_setting(augment)
        # A chain without a seed of its own draws under this dataset's.
        self._augment = replace(chain, seed=seed) if chain is not None and chain.seed is None else chain
        self._epoch = SharedEpoch()
        self._worker_stats = WorkerStatsBoard()
        self._iteration_mark: ReadStats | None = None
        if isinstance(worker_blocks, bool) or not isinstance(worker_blocks, int) or worker_blocks < 0:
            raise ValueError(f"worker_blocks must be zero or a positive integer, not {worker_blocks!r}")
        self._worker_blocks = worker_blocks
        self._object_store = object_store
        self._requests_in_flight = requests_in_flight
        # Checked here, so that a bad one fails before any worker starts.
        self._timeouts = Timeouts.build(connect_timeout, read_timeout)
        self._local: _ProcessLocal | None = None
        readahead_route.track(self)
        # Open now, so a wrong URI or field name fails here rather than in a
        # worker; BatchReader checks the names against record 0.
        try:
            self._open()
        except UnknownNameError as error:
            raise error.passed_as(_argument_for(error, inputs, target, fields, targets)) from None
        # Classes learnt here (a scan of the metadata when not given) go to
        # every worker's reader as given, so no worker scans again.
        self._labels = dict(self._open().reader.labels) or None

    # -- process-local state ------------------------------------------------

    def _open(self) -> _ProcessLocal:
        local = self._local
        pid = os.getpid()
        if local is None or local.pid != pid:
            in_worker = _get_worker_info() is not None
            threads = self._threads if self._threads is not None else (1 if in_worker else None)
            reader = BatchReader(
                self._uri,
                fields=list(dict.fromkeys(self._fields.values())),
                targets=list(dict.fromkeys(self._targets.values())),
                threads=threads,
                verify_checksums=self._verify,
                window=self._window,
                object_store=self._object_store,
                requests_in_flight=self._requests_in_flight,
                connect_timeout=self._timeouts.connect,
                read_timeout=self._timeouts.read,
                annotations=self._annotations,
                extras=self._extras,
                labels=self._labels,
                cache_dir=self._cache_dir,
                cache_limit=self._cache_limit,
                augment=self._augment,
            )
            local = _ProcessLocal(pid, reader, self._buffer_source(in_worker), in_worker)
            self._local = local
            if in_worker:
                self._worker_stats.claim(getattr(_get_worker_info(), "id", 0), reader.stats)
        return local

    def _buffer_source(self, in_worker: bool) -> BufferSource:
        return buffer_source(in_worker, pin_memory=self._pin_memory, worker_blocks=self._worker_blocks)

    def __getstate__(self) -> dict[str, object]:
        readahead_route.handed_on(self)
        # A spawned worker gets the store's settings (an S3 endpoint registered
        # in this process's registry, say), not a store it cannot unpickle.
        store = self._object_store
        if store is None and self._local is not None:
            store = self._local.reader.object_store
        reader_state = self._local.reader.opened_state(inherited=True) if self._local is not None else None
        return pickled_state.outgoing(
            self.__dict__,
            left_behind={"_local": None, "_object_store": pickled_state.portable_store(store)},
            opened=reader_state.dataset if reader_state is not None else None,
        )

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(pickled_state.incoming(state))
        self._local = None
        readahead_route.track(self)

    # -- public surface -----------------------------------------------------

    @property
    def uri(self) -> str:
        return self._uri

    @property
    def window(self) -> Window | None:
        """The window every field carrying its axis is cut to, or None."""
        return self._window

    @property
    def reader(self) -> BatchReader:
        """This process's `BatchReader` (its `stats` say which path served each record)."""
        return self._open().reader

    def shard_table(self) -> ShardTable | None:
        """Where this process's reader finds each record, for `ShardAwareSampler`
        (see `sds_loader.dataset_protocol.ShardAddressed`)."""
        return self._open().reader.shard_table()

    _addressing = shard_table  # the name of earlier releases

    @property
    def buffers(self) -> str:
        """Where this process's batches are allocated: "ring" (a worker), "pinned" or "pool"."""
        return self._open().source.kind

    @property
    def keys(self) -> tuple[str, ...]:
        """The keys of every sample and batch: fields, then targets, then window lengths."""
        padded = self._open().reader.schema.lengths if self._window is not None and self._window.pad else ()
        lengths = tuple(length_key(key) for key, name in self._fields.items() if name in padded)
        extra = tuple(key for spec in self._annotations for key in spec.keys())
        return (*self._fields, *self._targets, *lengths, *extra, *self._extras, *self._augment_keys())

    def _augment_keys(self) -> tuple[str, ...]:
        """The keys of what the chain drew (and the metadata it changed), in the reader's order."""
        if self._augment is None:
            return ()
        return self._open().reader.augment_keys

    @property
    def epoch(self) -> int:
        return self._epoch.value

    def set_epoch(self, epoch: int) -> None:
        """Crop epoch `epoch`'s random windows from the next batch on, in every worker."""
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ValueError(f"epoch must be a non-negative integer, not {epoch!r}")
        self._epoch.value = epoch
        self._iteration_mark = self.stats().total

    def stats(self) -> DatasetStats:
        """Read stats (counts and stage times) summed over this process and every DataLoader
        worker the dataset started, persistent or not, forked or spawned: in `total`, and
        since the last `set_epoch` in `iteration`. In a worker: that worker's own."""
        local = self._open()
        own = local.reader.stats.snapshot()
        if local.in_worker:
            return DatasetStats(own, own, ReadStats())
        workers = self._worker_stats.total()
        total = own + workers
        mark = self._iteration_mark
        return DatasetStats(total, total if mark is None else total - mark, workers)

    def __len__(self) -> int:
        return len(self._open().reader)

    def will_need(self, indices: Sequence[int]) -> int:
        """Announce records a later batch reads (see `BatchReader.will_need`); returns the bytes.

        For local shards the page cache is shared by every process, so the
        main process can announce what its workers will read;
        `ShardAwareSampler` does. For object storage the bytes are fetched
        by the process that announces: once this dataset has gone to
        DataLoader workers, the process it went from announces nothing
        unless it has a node cache, which the workers read: its
        announcements then fetch into the node cache only
        (`readahead_route`).
        """
        cached = self._cache_dir is not None
        if not readahead_route.reads_ahead_here(self, self._uri, cached):
            return 0
        into_cache = cached and readahead_route.serves_others(self)
        return self._open().reader.will_need(indices, into_cache=into_cache)

    def __getitem__(self, index: int) -> dict[str, _torch.Tensor]:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> Batch:
        """Read the whole batch in one native call into its final tensors.

        Indices from a sampler's ``fill="mask"`` (a `FilledBatch`) give a batch
        whose padding rows are zero (their ``ordinal`` extra -1) and whose
        ``valid`` key marks its records.
        """
        ordinal_key = "ordinal" if "ordinal" in self._extras else None
        return mask_padding_rows(self._read_batch(indices), indices, ordinal_key)

    def _read_batch(self, indices: Sequence[int]) -> Batch:
        if isinstance(indices, _torch.Tensor):
            indices = indices.numpy()
        local = self._open()
        reader = local.reader
        starts = self._starts(reader, indices)
        ids: list[list[str]] = []

        epoch = self._epoch.value

        def read(allocate: Allocator) -> dict[str, np.ndarray]:
            arrays = reader.read(indices, starts=starts, allocator=allocate, epoch=epoch)
            if "id" in self._extras:
                ids.append(arrays.pop("id").tolist())
            return arrays

        with read_batch_range():
            by_source, ring_block = read_tensors(read, local.source)
        if local.in_worker:
            self._worker_stats.publish(reader.stats)
        tensors = {key: by_source[name] for key, name in self._sources().items() if name in by_source}
        tensors.update({key: by_source[key] for key in self._augment_keys()})
        # A worker's ring (the only source that carries anything) carries its block.
        block = cast("_Block | None", ring_block)
        if not (self._annotations or self._extras):
            return Batch(tensors, next(iter(tensors.values())).shape[0], ring_block=block)
        ragged: dict[str, object] = {}
        offsets_of: dict[str, str] = {}
        for key, kind in extra_kinds(self._annotations, self._extras).items():
            if kind.kind == "row":
                tensors[key] = by_source[key]
            elif kind.kind == "ids":
                ragged[key] = ids[0]
            else:
                ragged[key] = by_source[key]
                if kind.offsets is not None:
                    offsets_of[key] = kind.offsets
        return Batch(tensors, len(indices), ring_block=block, ragged=ragged, offsets_of=offsets_of)

    # -- reading into another's buffers (sds_loader.torch.mixture) ------------

    def _starts(self, reader: BatchReader, indices: Sequence[int] | np.ndarray) -> np.ndarray | None:
        """Each row's window start under this dataset's seed and the shared epoch, or None."""
        if self._window is None:
            return None
        return reader.window_starts(indices, seed=self._seed, epoch=self._epoch.value)

    def _sources(self) -> dict[str, str]:
        """Output key -> the name the reader returns it under, window lengths included."""
        sources = {**self._fields, **self._targets}
        if self._window is not None and self._window.pad:
            sources.update({length_key(key): length_key(name) for key, name in self._fields.items()})
        return sources

    def _row_layout(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """Output key -> (shape of one row, dtype), as every batch of this dataset delivers it.

        Fields, targets and window lengths are learnt from the reader's layout
        (record 0's, or the last batch's), so a dataset whose records differ in
        shape, read without a window, may deliver another layout in a later
        batch; `_read_rows_into` then fails naming the difference. Class
        labels, annotation values with one row per record (status, counts,
        padded fields) and ``ordinal``/``start`` are learnt from a read of
        record 0. Ragged annotation items and ids have no row shape: see
        `_ragged_layout`.
        """
        window = self._window
        schema = self._open().reader.schema
        if window is not None:
            if window.length is None:
                raise ValueError(
                    f"{self!r} pads each batch to its longest window (Window(..., None)), so its "
                    "row shape differs from batch to batch; give the window a length"
                )
            schema = schema.windowed(window.length)
        by_name: dict[str, tuple[tuple[int, ...], np.dtype]] = {
            spec.name: (tuple(spec.shape), spec.dtype) for spec in schema.fields
        }
        by_name.update({target.key: ((), target.dtype) for target in schema.targets})
        by_name.update({length_key(name): ((), np.dtype(np.int64)) for name in schema.lengths})
        layout = {key: by_name[name] for key, name in self._sources().items() if name in by_name}
        if self._needs_extras():
            first = self._first_extras()
            for key, name in self._extra_sources().items():
                if self._extra_kind(key).kind == "row":
                    layout[key] = (tuple(first[name].shape[1:]), first[name].dtype)
        return layout

    def _ragged_layout(self) -> dict[str, tuple[Kind, tuple[int, ...], np.dtype | None]]:
        """Ragged key -> (its kind, shape of one item, dtype): items, offsets and ids (dtype None)."""
        if not self._needs_extras():
            return {}
        first = self._first_extras()
        out: dict[str, tuple[Kind, tuple[int, ...], np.dtype | None]] = {}
        for key, kind in extra_kinds(self._annotations, self._extras).items():
            if kind.kind == "items" or kind.kind == "offsets":
                out[key] = (kind, tuple(first[key].shape[1:]), first[key].dtype)
            elif kind.kind == "ids":
                out[key] = (kind, (), None)
        return out

    def _needs_extras(self) -> bool:
        return bool(self._annotations or self._extras or self._open().reader.labels or self._augment_keys())

    def _extra_kind(self, key: str) -> Kind:
        return extra_kinds(self._annotations, self._extras).get(key, Kind("row"))

    def _extra_sources(self) -> dict[str, str]:
        """Output key -> reader name of every key the reader returns beside its schema's:
        class labels (under their output key), annotation keys and extras."""
        labels = self._open().reader.labels
        sources = {key: name for key, name in self._targets.items() if name in labels}
        sources.update({key: key for key in extra_kinds(self._annotations, self._extras)})
        sources.update({key: key for key in self._augment_keys()})
        return sources

    def _first_extras(self) -> dict[str, np.ndarray]:
        """What a read of record 0 returns beside the schema's arrays, by reader name."""
        reader = self._open().reader
        first = np.zeros(1, dtype=np.int64)
        arrays = reader.read(first, starts=self._starts(reader, first), epoch=self._epoch.value)
        names = set(self._extra_sources().values())
        return {name: array for name, array in arrays.items() if name in names}

    def _read_rows_into(self, indices: np.ndarray, out: Mapping[str, np.ndarray]) -> dict[str, object]:
        """Read `indices` in one native call into `out` (output key -> C-contiguous rows).

        `out` holds every key of `_row_layout`: fields and targets are read
        straight into it, labels and per-row annotation values are copied in
        after. Returns the ragged keys (items, offsets, ids) as read.
        """
        local = self._open()
        reader = local.reader
        sources = self._sources()
        extra = self._extra_sources()
        arrays = reader.read(
            indices,
            out={sources[key]: array for key, array in out.items() if key not in extra},
            starts=self._starts(reader, indices),
            epoch=self._epoch.value,
        )
        if local.in_worker:  # a Mixture's member, read in a worker
            self._worker_stats.publish(reader.stats)
        ragged: dict[str, object] = {}
        for key, name in extra.items():
            if key in out:
                out[key][...] = arrays[name]
            elif key == "id":
                ragged[key] = arrays[name].tolist()
            else:
                ragged[key] = arrays[name]
        return ragged

    #: Grain's batched-read hook for random-access sources is spelled ``_getitems``.
    _getitems = __getitems__

    def __repr__(self) -> str:
        extra = ""
        if self._threads is not None:
            extra += f", threads={self._threads}"
        if self._pin_memory:
            extra += ", pin_memory=True"
        if self._verify is not True:
            extra += f", verify_checksums={self._verify!r}"
        if self._window is not None:
            extra += f", window={self._window!r}, seed={self._seed}"
        if self._augment is not None:
            extra += f", augment={self._augment!r}"
        if self._worker_blocks != DEFAULT_BLOCKS:
            extra += f", worker_blocks={self._worker_blocks}"
        return f"SDSTorchDataset({self._uri!r}, fields={self._fields!r}, targets={self._targets!r}{extra})"


# -- what a MixtureDataset reads of each member (the members' private state stays theirs) --


def row_layout(dataset: SDSTorchDataset) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Each fixed-size key's row shape and dtype as `dataset` delivers them."""
    return dataset._row_layout()


def ragged_layout(dataset: SDSTorchDataset) -> dict[str, tuple[Kind, tuple[int, ...], np.dtype | None]]:
    """Each ragged key's kind, item shape and dtype (None for ids) as `dataset` delivers them."""
    return dataset._ragged_layout()


def target_sources(dataset: SDSTorchDataset) -> Mapping[str, str]:
    """Output key -> the metadata key each of `dataset`'s targets reads."""
    return dataset._targets


def read_rows_into(
    dataset: SDSTorchDataset, indices: np.ndarray, out: Mapping[str, np.ndarray]
) -> dict[str, object]:
    """Read `indices` of `dataset` into `out`'s rows; returns the ragged keys in row order."""
    return dataset._read_rows_into(indices, out)


def buffer_source(in_worker: bool, *, pin_memory: bool, worker_blocks: int) -> BufferSource:
    """Where this process's batches go: a worker's ring, pinned memory, or the page pool."""
    if in_worker:
        return WorkerRing(worker_blocks)
    if pin_memory and _torch.cuda.is_available():
        return PinnedSource()
    return PagePool()


def _key_map(
    argument: str, default_key: str, default_source: str | None, extra: Mapping[str, str] | None
) -> dict[str, str]:
    """Output key -> source name: the default key first, then `extra`, which may replace it."""
    mapping: dict[str, str] = {}
    if default_source is not None:
        if not isinstance(default_source, str) or not default_source:
            raise TypeError(f"{default_key}= must be a non-empty string or None, not {default_source!r}")
        mapping[default_key] = default_source
    if extra is not None:
        if not isinstance(extra, Mapping):
            raise TypeError(f"{argument}= must map output keys to source names, not {type(extra).__name__}")
        for key, source in extra.items():
            if not isinstance(key, str) or not key or not isinstance(source, str) or not source:
                raise TypeError(
                    f"{argument}= must map non-empty strings to non-empty strings; got {key!r}: {source!r}"
                )
            mapping[key] = source
    sources: dict[str, str] = {}
    for key, source in mapping.items():
        if source in sources:
            raise ValueError(
                f"{source!r} is mapped to both {sources[source]!r} and {key!r}; map each "
                f"source once (pass {default_key}=None to drop the default key)"
            )
        sources[source] = key
    return mapping


def _argument_for(
    error: UnknownNameError,
    inputs: str | None,
    target: str | None,
    fields: Mapping[str, str] | None,
    targets: Mapping[str, str] | None,
) -> str:
    """The argument of SDSTorchDataset that selected the name `error` reports."""
    if isinstance(error, UnknownTargetError):
        default_key, default, extra, plural = "target", target, targets, "targets="
    else:
        default_key, default, extra, plural = "inputs", inputs, fields, "fields="
    if error.name == default and default_key not in (extra or {}):
        return f"{default_key}="
    return plural


def _check_disjoint(fields: Mapping[str, str], targets: Mapping[str, str]) -> None:
    shared_keys = sorted(set(fields) & set(targets))
    if shared_keys:
        raise ValueError(f"key {shared_keys[0]!r} names both a field and a target; rename one")
    shared_sources = sorted(set(fields.values()) & set(targets.values()))
    if shared_sources:
        raise ValueError(
            f"{shared_sources[0]!r} is selected both as a field and as a metadata target; "
            "BatchReader returns both in one mapping, so read them through separate datasets"
        )
    if not fields and not targets:
        raise ValueError("select at least one field or target")


# Last, so that sds_loader.torch.mixture, which needs this module's classes at
# call time only, can be imported from here without a cycle.
