"""BatchReader: a batch of ordinals in, one array per field out."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from signal_dataset import CorruptDatasetError
from signal_dataset.storage import ObjectStore

from sds_loader import fallback
from sds_loader.addressing import ShardTable, native_unavailable_reason, shard_table
from sds_loader.dataset_root import open_dataset
from sds_loader.errors import MixedShapesError, SchemaMismatch, UnknownNameError, UnknownTargetError
from sds_loader.indices import normalize, normalize_one
from sds_loader.outputs import Allocator, adopt, allocate
from sds_loader.schema import FieldSpec, Schema, TargetSpec, target_kind
from sds_loader.stores import for_this_process, portable


#: More threads than this are never started for one read (the native side takes a C int).
_MAX_THREADS = 1 << 10


def default_threads() -> int:
    return max(1, min(4, os.cpu_count() or 1))


@dataclass
class ReadStats:
    """How many records each path served since the reader was made."""

    native_records: int = 0
    fallback_records: int = 0
    batches: int = 0
    #: Batches read twice because a record disagreed with the assumed layout.
    schema_retries: int = 0


class _ProcessState:
    """Everything that must not cross a fork: open dataset, native file cache."""

    def __init__(
        self, uri: str, object_store: ObjectStore | None, verify_checksums: bool, max_open_files: int
    ) -> None:
        from sds_loader import _native

        self.pid = os.getpid()
        store = for_this_process(object_store)
        self.dataset = open_dataset(uri, object_store=store)
        self.fallback = fallback.FallbackReader(uri, self.dataset.object_store)
        self.native_reason = native_unavailable_reason(self.dataset)
        self.table: ShardTable | None = None
        self.native = None
        if self.native_reason is None:
            self.table = shard_table(self.dataset)
            # Any count past 2**32 means "no limit"; the native side takes a size_t.
            self.native = _native.ShardSet(list(self.table.paths), verify_checksums, min(max_open_files, 1 << 32))


class BatchReader:
    """Read batches of SDS records, verified and decoded, into one array per field.

    The native core groups a batch's ordinals by shard and chunk, reads each run
    of adjacent chunks with one `pread`, checks every hash, decompresses each
    chunk once however many of its records were asked for, and writes every
    selected field straight into its row of the output. Python is touched once
    per batch, not per record.

    `fields=None` selects every field of the first record read. `targets` are
    scalar keys of each record's metadata (such as ``"label"``), returned as
    int64 when the first record holds an integer or bool and float64 otherwise.
    `threads` defaults to min(4, CPU count); a DataLoader worker should pass 1,
    since the workers are already the parallelism.

    Shards the native core cannot read (transposed chunks, reference datasets,
    remote roots) are served by signal_dataset's reader with identical results;
    `stats` counts which path served each record.

    `object_store` is passed to `signal_dataset.open` (a store configured for
    another endpoint, say); by default the store comes from signal_dataset's
    registry, as it does for `signal_dataset.open(uri)`.
    """

    def __init__(
        self,
        uri: str,
        *,
        fields: Sequence[str] | None = None,
        targets: Sequence[str] = (),
        threads: int | None = None,
        verify_checksums: bool = True,
        max_open_files: int = 64,
        object_store: ObjectStore | None = None,
    ) -> None:
        if not isinstance(uri, str | os.PathLike):
            raise TypeError(f"uri must be a path or URI string, not {type(uri).__name__}")
        self._uri = os.fspath(uri)
        self._fields = _names("fields", fields) if fields is not None else None
        self._targets = _names("targets", targets)
        if threads is None:
            threads = default_threads()
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be a positive integer, not {threads!r}")
        if isinstance(max_open_files, bool) or not isinstance(max_open_files, int) or max_open_files < 1:
            raise ValueError(f"max_open_files must be a positive integer, not {max_open_files!r}")
        self._threads = threads
        self._verify = bool(verify_checksums)
        self._max_open_files = max_open_files
        self._object_store = object_store
        self._schema: Schema | None = None
        self._lock = threading.Lock()
        self._state: _ProcessState | None = None
        self.stats = ReadStats()
        self._check_names()

    def _check_names(self) -> None:
        """Check fields= and targets= against record 0, so a typo fails here, not in a worker.

        Safe before forking DataLoader workers whatever the dataset: records
        only signal_dataset can read are read in a helper process. A corrupt
        record 0 is left to the first batch that holds it, so that the rest
        of its dataset stays readable.
        """
        if len(self._process().dataset) == 0:
            return
        try:
            self._schema = self._probe(0)
        except CorruptDatasetError:
            pass

    # -- process-local state ------------------------------------------------

    def _process(self) -> _ProcessState:
        state = self._state
        if state is None or state.pid != os.getpid():
            with self._lock:
                state = self._state
                if state is None or state.pid != os.getpid():
                    state = _ProcessState(self._uri, self._object_store, self._verify, self._max_open_files)
                    self._state = state
        return state

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        state["_state"] = None
        state["_lock"] = None
        state["_object_store"] = portable(self._object_store)
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    # -- public surface -----------------------------------------------------

    @property
    def uri(self) -> str:
        return self._uri

    @property
    def threads(self) -> int:
        return self._threads

    @threads.setter
    def threads(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"threads must be a positive integer, not {value!r}")
        self._threads = value

    @property
    def native_unavailable_reason(self) -> str | None:
        """Why every record goes through signal_dataset, or None when none must."""
        return self._process().native_reason

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

    def __repr__(self) -> str:
        return (
            f"BatchReader({self._uri!r}, fields={self._fields!r}, targets={self._targets!r}, "
            f"threads={self._threads})"
        )

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        """One record's selected fields and targets, without the batch axis."""
        ordinal = normalize_one(index, len(self))
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
        """
        ordinals = normalize(indices, len(self))
        schema = self._schema
        if schema is None:
            if len(self) == 0:
                raise ValueError(
                    f"dataset {self._uri} holds no records, so a batch of it has no fields "
                    "to return"
                )
            schema = self._probe(int(ordinals[0]) if ordinals.size else 0)

        def buffers(layout: Schema) -> dict[str, np.ndarray]:
            if out is not None:
                return adopt(out, layout, ordinals.size)
            return allocate(layout, ordinals.size, allocator)

        arrays = buffers(schema)
        if ordinals.size == 0:
            return arrays
        try:
            self._read_into(ordinals, schema, arrays)
        except SchemaMismatch:
            self.stats.schema_retries += 1
            schema = self._uniform_schema(ordinals)
            arrays = buffers(schema)
            try:
                self._read_into(ordinals, schema, arrays)
            except SchemaMismatch as again:
                # Every record agreed when probed one by one, yet not when read
                # together: report it as the layout problem it is.
                raise MixedShapesError(f"{again}; batch layout {schema.describe()}") from None
        self._schema = schema
        self.stats.batches += 1
        return arrays

    # -- internals ----------------------------------------------------------

    def _read_into(self, ordinals: np.ndarray, schema: Schema, arrays: dict[str, np.ndarray]) -> None:
        state = self._process()
        if state.native is None:
            state.fallback.fill(ordinals, np.arange(ordinals.size), schema, arrays)
            self.stats.fallback_records += int(ordinals.size)
            return
        assert state.table is not None
        files, locals_ = state.table.locate(ordinals)
        field_args = [
            (spec.name, spec.tensor, spec.dtype_name, spec.shape, arrays[spec.name])
            for spec in schema.fields
        ]
        target_args = [(target.key, target.kind, arrays[target.key]) for target in schema.targets]
        needs_fallback = state.native.read(
            files, locals_, ordinals, field_args, target_args, min(self._threads, _MAX_THREADS)
        )
        positions = np.flatnonzero(needs_fallback)
        if positions.size:
            state.fallback.fill(ordinals[positions], positions, schema, arrays)
        self.stats.fallback_records += int(positions.size)
        self.stats.native_records += int(ordinals.size - positions.size)

    def _probe(self, ordinal: int) -> Schema:
        """Learn one record's layout: its fields' dtypes and shapes, its targets' kinds."""
        state = self._process()
        probed = None
        if state.native is not None:
            assert state.table is not None
            files, locals_ = state.table.locate(np.asarray([ordinal], dtype=np.int64))
            probed = state.native.probe(int(files[0]), int(locals_[0]), ordinal)
        if probed is not None:
            raw_fields, metadata_json = probed
            available = tuple(
                FieldSpec(name=name, tensor=key, dtype_name=dtype, shape=tuple(shape))
                for name, key, dtype, shape in raw_fields
            )
            metadata = json.loads(metadata_json)
        else:
            available, metadata = state.fallback.probe(ordinal)
        fields = self._select(available, ordinal)
        clash = sorted({spec.name for spec in fields} & set(self._targets))
        if clash:
            raise ValueError(
                f"{clash[0]!r} names both a field and a target, and a batch has one array per "
                "name; select the field with fields= or drop the target"
            )
        return Schema(
            fields=fields,
            targets=tuple(self._target_spec(key, metadata, ordinal) for key in self._targets),
        )

    def _select(self, available: tuple[FieldSpec, ...], ordinal: int) -> tuple[FieldSpec, ...]:
        if self._fields is None:
            return available
        by_name = {spec.name: spec for spec in available}
        missing = [name for name in self._fields if name not in by_name]
        if missing:
            raise UnknownNameError(
                argument="fields=", name=missing[0], available=list(by_name), ordinal=ordinal, uri=self._uri
            )
        return tuple(by_name[name] for name in self._fields)

    def _target_spec(self, key: str, metadata: Mapping[str, object], ordinal: int) -> TargetSpec:
        if key not in metadata:
            raise UnknownTargetError(
                argument="targets=", name=key, available=list(metadata), ordinal=ordinal, uri=self._uri
            )
        return TargetSpec(key=key, kind=target_kind(metadata[key], key=key, ordinal=ordinal))

    def _uniform_schema(self, ordinals: np.ndarray) -> Schema:
        """The one layout every record of this batch shares, or MixedShapesError."""
        layouts: dict[tuple, list[int]] = {}
        schemas: dict[tuple, Schema] = {}
        for ordinal in np.unique(ordinals).tolist():
            schema = self._probe(ordinal)
            key = tuple((f.name, f.dtype_name, f.shape) for f in schema.fields)
            layouts.setdefault(key, []).append(ordinal)
            schemas.setdefault(key, schema)
        if len(layouts) == 1:
            return next(iter(schemas.values()))
        lines = []
        for key, members in layouts.items():
            shown = ", ".join(map(str, members[:8])) + (" ..." if len(members) > 8 else "")
            lines.append(f"  records [{shown}]: {schemas[key].describe()}")
        raise MixedShapesError(
            "this batch mixes record layouts, so it cannot be stacked into one array per "
            "field:\n" + "\n".join(lines) + "\nRead them in separate batches, or select "
            "only fields that agree with fields=."
        )


def _names(argument: str, values: Sequence[str]) -> tuple[str, ...]:
    if isinstance(values, str):
        return (values,)
    names = tuple(values)
    for name in names:
        if not isinstance(name, str) or not name:
            raise TypeError(f"{argument} must be non-empty strings; got {name!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"{argument} names {list(names)} more than once")
    return names
