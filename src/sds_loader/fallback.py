"""Serve records through signal_dataset's own reader, in a helper process.

Used where the native core cannot: transposed chunks (of a dataset's own
shards or of those a reference dataset names) and roots in stores the native
core has no source for (`gs://` without google-auth, say). The results are the same arrays, filled in
the same output slots, so a caller cannot tell which path served a record
except through `BatchReader.stats`.

Why a helper process: a process that has used array_record (which
signal_dataset reads and writes shards with) forks children whose own
array_record reads crash, persistent DataLoader workers among them
(reproduced with signal_dataset alone). A script that writes a dataset, or
looks at a record, before building its DataLoader is the common case, not a
corner. So signal_dataset's reader never runs in a process that may fork:
it runs in a fresh interpreter (`fallback_helper`) per process, and records
come back pickled, a copy the native path does not pay, acceptable for
datasets the native path cannot read at all. The helper costs about a second
to start, once per process (per persistent worker), and only for datasets
that need it.

Without `os.fork` (Windows) there is no fork to guard against, and the reads
run in this process.

The reader's arguments mean the same here as on the native path, where
signal_dataset can honour them: `max_open_files` bounds the shards it keeps
staged (`StorageOptions.max_open_shards`), and errors have the native path's
types (`TargetError` for a target out of int64, `CorruptShardError` naming
the shard and record for damage, the store's own error for a shard that
cannot be read at all). Two it cannot: `verify_checksums=False` (Riegeli's
reader checks every chunk's hashes, always) and `threads` (array_record
decodes a batch on its process-wide thread pool, whose size is fixed); the
README says so.

What is damage is decided by exception type, not message text. array_record
reports every failure as RuntimeError; signal_dataset's reader lets it
through unchanged. So the shards are read through `_TypedShardStore`, which
turns array_record's RuntimeError into `ShardRefused` where it is raised, once
it has checked that the shard itself can be opened and read (a shard that
cannot is the storage error Python raises for it, as on the native path).
"""

from __future__ import annotations

import json
import math
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast, overload

import numpy as np
import signal_dataset as sds
from signal_dataset.record.metadata import RecordMetadataCodec
from signal_dataset.storage import ArrayRecordShardStore, object_store_for
from signal_dataset.storage.paths import validate_root_uri
from signal_dataset.storage.staging import default_staging

from sds_loader import fallback_protocol
from sds_loader.errors import CorruptShardError, SchemaMismatch, TargetError
from sds_loader.schema import (
    FieldSpec,
    RecordLayout,
    Schema,
    raise_missing,
    raise_not_scalar,
    record_layout,
    safetensors_name,
)
from sds_loader.storage.stores import for_this_process, portable
from sds_loader.windows import cut, length_key

#: One record as the helper sends it: the requested fields' arrays, and the
#: record's metadata as plain dicts and lists.
Decoded = tuple[dict[str, np.ndarray], dict[str, object]]


class FallbackReader:
    """signal_dataset's reader for one dataset, in a helper process where a fork may follow.

    `object_store` is the store the dataset was opened with in this process;
    the helper gets its settings where they can cross a process boundary (an
    S3 store's `S3Options`), and otherwise resolves the store from
    signal_dataset's registry as `signal_dataset.open` does.
    """

    def __init__(
        self,
        uri: str,
        object_store: sds.storage.ObjectStore | None = None,
        *,
        verify_checksums: bool = True,
        max_open_files: int | None = None,
    ) -> None:
        self._uri = uri
        self._store = object_store
        self._settings = ReadSettings(verify_checksums=bool(verify_checksums), max_open_files=max_open_files)
        self._pid = os.getpid()
        self._helper: subprocess.Popen[bytes] | None = None
        self._dataset: sds.Dataset | None = None
        self._lock = threading.Lock()

    @property
    def in_helper(self) -> bool:
        """Whether reads run in a helper process (else in this one)."""
        return hasattr(os, "fork")

    def probe(self, ordinal: int) -> tuple[tuple[FieldSpec, ...], dict[str, object]]:
        """Every field of record `ordinal` and its metadata."""
        return cast(tuple[tuple[FieldSpec, ...], dict[str, object]], self._call("probe_record", ordinal))

    def fill(
        self,
        ordinals: np.ndarray,
        positions: np.ndarray,
        schema: Schema,
        outputs: Mapping[str, np.ndarray],
        starts: np.ndarray | None = None,
        pad: bool = False,
    ) -> None:
        """Decode `ordinals` with signal_dataset and write them at `positions`
        (cut to the window at `starts` along each windowed field's axis)."""
        unique, inverse = np.unique(ordinals, return_inverse=True)
        names = tuple(spec.name for spec in schema.fields)
        records: list[Decoded] = self._call("read_records", [int(value) for value in unique], names)
        for row, (position, which) in enumerate(zip(positions.tolist(), inverse.tolist(), strict=True)):
            fields, metadata = records[which]
            start = None if starts is None else int(starts[row])
            _write_row(int(unique[which]), fields, metadata, schema, outputs, position, start, pad)

    def record_layouts(self, ordinals: list[int]) -> list[RecordLayout]:
        """Each record's field layouts, from its metadata (no tensor is read)."""
        return cast(list[RecordLayout], self._call("read_layouts", ordinals))

    def record_documents(self, ordinals: list[int]) -> list[dict[str, Any]]:
        """Each record's metadata document (id, metadata, fields and their axes), as the metadata
        shards' JSON holds it (no tensor is read)."""
        return cast(list[dict[str, Any]], self._call("read_documents", ordinals))

    def close(self) -> None:
        """Stop this process's helper; the next read starts another."""
        with self._lock:
            helper, self._helper = self._helper, None
        if helper is not None and self._pid == os.getpid():
            _stop(helper)

    def __getstate__(self) -> dict[str, object]:
        return {"_uri": self._uri, "_store": portable(self._store), "_settings": self._settings, "_pid": None}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state, _helper=None, _dataset=None, _lock=threading.Lock())

    # -- internals ---------------------------------------------------------

    def _call(self, name: str, *args: object) -> Any:  # what function `name` returns, maybe unpickled
        if self._pid != os.getpid():
            # Inherited across a fork: the parent's helper, dataset and lock
            # are not ours. Forgotten, not closed: the parent still uses them.
            self.__setstate__(
                {
                    "_uri": self._uri,
                    "_store": for_this_process(self._store),
                    "_settings": self._settings,
                    "_pid": os.getpid(),
                }
            )
        if not self.in_helper:
            if self._dataset is None:
                self._dataset = open_dataset(self._uri, self._store, self._settings)
            try:
                return globals()[name](self._dataset, *args)
            except CorruptShardError as exc:
                raise self._explained(exc) from None
        with self._lock:
            if self._helper is None:
                self._helper = self._start()
            helper = self._helper
            assert helper.stdin is not None and helper.stdout is not None  # both are pipes
            try:
                fallback_protocol.send(helper.stdin, (name, args))
                status, value = fallback_protocol.receive(helper.stdout)
            except (EOFError, OSError) as exc:
                self._helper = None
                _stop(helper)
                raise sds.StorageError(
                    f"the helper process reading {self._uri} through signal_dataset ended "
                    f"(exit status {helper.returncode}); the next read starts a new one"
                ) from exc
        if status == "error":
            raise self._explained(value) if isinstance(value, CorruptShardError) else value
        return value

    def _explained(self, error: CorruptShardError) -> CorruptShardError:
        if self._settings.verify_checksums:
            return error
        return CorruptShardError(
            f"{error}; verify_checksums=False does not reach this record: signal_dataset reads it, "
            "and its reader checks every chunk's hashes"
        )

    def _start(self) -> subprocess.Popen[bytes]:
        helper = subprocess.Popen(
            # -c rather than -m: the package imports this module, which runpy warns about.
            [sys.executable, "-c", "from sds_loader.fallback_helper import main; main()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert helper.stdin is not None and helper.stdout is not None  # both are pipes
        try:
            fallback_protocol.send(helper.stdin, (self._uri, portable(self._store), self._settings))
            status, value = fallback_protocol.receive(helper.stdout)
        except (EOFError, OSError) as exc:
            _stop(helper)
            raise sds.StorageError(
                f"the helper process that reads {self._uri} through signal_dataset did not start "
                f"(exit status {helper.returncode})"
            ) from exc
        if status == "error":
            _stop(helper)
            raise value
        return helper


def _stop(helper: subprocess.Popen[bytes]) -> None:
    for stream in (helper.stdin, helper.stdout):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass
    try:
        helper.wait(timeout=10)
    except subprocess.TimeoutExpired:
        helper.kill()
        helper.wait()


# -- run by the helper (or in this process where nothing forks) -------------


@dataclass(frozen=True)
class ReadSettings:
    """The reader's arguments that reach signal_dataset's side."""

    #: Not honoured (Riegeli always checks hashes); kept to say so in errors.
    verify_checksums: bool = True
    #: Shards kept staged (StorageOptions.max_open_shards); None: signal_dataset's default.
    max_open_files: int | None = None


class ShardRefused(RuntimeError):
    """array_record refused the bytes of a shard that could itself be read: damage."""


class _TypedShardStore(ArrayRecordShardStore):
    """signal_dataset's shard store, with array_record's refusals given a type of their own."""

    def read(
        self,
        uri: str,
        index: int,
        *,
        generation: int | None = None,
        options: str,
        file_reader_buffer_size: int | None = None,
    ) -> bytes:
        try:
            return super().read(
                uri,
                index,
                generation=generation,
                options=options,
                file_reader_buffer_size=file_reader_buffer_size,
            )
        except RuntimeError as exc:
            raise self._classified(uri, generation, exc) from exc

    def read_many(
        self,
        uri: str,
        indices: Sequence[int],
        *,
        generation: int | None = None,
        options: str,
        file_reader_buffer_size: int | None = None,
    ) -> tuple[bytes, ...]:
        try:
            return super().read_many(
                uri,
                indices,
                generation=generation,
                options=options,
                file_reader_buffer_size=file_reader_buffer_size,
            )
        except RuntimeError as exc:
            raise self._classified(uri, generation, exc) from exc

    def _classified(self, uri: str, generation: int | None, exc: RuntimeError) -> Exception:
        # array_record raises RuntimeError both for bytes it refuses and for a
        # file it cannot open or read; reading the staged file here tells them
        # apart by the type Python raises, not by array_record's wording.
        # Opened without blocking: a FIFO where a shard should be is refused,
        # never waited on.
        try:
            with self.staging.stage(uri, generation=generation) as path:
                descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
                try:
                    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                        return ShardRefused(f"local object is not a regular file: {path}")
                    os.pread(descriptor, 1, 0)
                finally:
                    os.close(descriptor)
        except OSError as unreadable:
            return unreadable
        return ShardRefused(str(exc))


def open_dataset(uri: str, store: sds.storage.ObjectStore | None, settings: ReadSettings) -> sds.Dataset:
    """`signal_dataset.open(uri)` as the fallback reads it: its shard store
    typed, its options the reader's."""
    root = validate_root_uri(uri)
    objects = store if store is not None else object_store_for(root, root_is_directory=True)
    options = (
        sds.StorageOptions()
        if settings.max_open_files is None
        else sds.StorageOptions(max_open_shards=settings.max_open_files)
    )
    shards = _TypedShardStore(
        staging=default_staging(objects, root=root, max_open_shards=options.max_open_shards)
    )
    return sds.open(uri, object_store=objects, options=options, shard_store=shards)


def probe_record(dataset: sds.Dataset, ordinal: int) -> tuple[tuple[FieldSpec, ...], dict[str, object]]:
    try:
        record = dataset[ordinal]
    except Exception as exc:  # noqa: BLE001 - _blame keeps what is not damage
        raise _blame(dataset, [ordinal], exc) from None
    return record_fields(record), _plain(record.metadata)


def read_records(dataset: sds.Dataset, ordinals: list[int], names: Sequence[str]) -> list[Decoded]:
    try:
        records = dataset.__getitems__(ordinals)
    except Exception as exc:  # noqa: BLE001 - _blame keeps what is not damage
        raise _blame(dataset, ordinals, exc) from None
    return [
        ({name: record[name].data for name in names if name in record.fields}, _plain(record.metadata))
        for record in records
    ]


def read_layouts(dataset: sds.Dataset, ordinals: list[int]) -> list[RecordLayout]:
    try:
        records = dataset.record_metadata.__getitems__(ordinals)
    except Exception as exc:  # noqa: BLE001 - _blame keeps what is not damage
        raise _blame(dataset, ordinals, exc, metadata=True) from None
    return [record_layout(record) for record in records]


def read_documents(dataset: sds.Dataset, ordinals: list[int]) -> list[dict[str, Any]]:
    try:
        records = dataset.record_metadata.__getitems__(ordinals)
    except Exception as exc:  # noqa: BLE001 - _blame keeps what is not damage
        raise _blame(dataset, ordinals, exc, metadata=True) from None
    # The document the metadata shards hold, as the native path reads it:
    # its fields' axes too (an augmentation's sample rate is one's step).
    codec = RecordMetadataCodec()
    return [json.loads(codec.encode(record)) for record in records]


#: What signal_dataset raises for a record it refuses to read.
DAMAGE = (ShardRefused, sds.CorruptDatasetError, sds.errors.ValidationError)


def _is_damage(exc: BaseException) -> bool:
    return isinstance(exc, DAMAGE)


def _blame(dataset: sds.Dataset, ordinals: list[int], exc: Exception, *, metadata: bool = False) -> Exception:
    """signal_dataset's refusal of a damaged record, as the CorruptShardError
    the native path raises: naming the shard and the ordinal. A batch read
    does not say which record failed, so they are read again one by one; an
    error that is not damage (storage, arguments) is returned as it was."""
    if not _is_damage(exc):
        return exc
    read_one = dataset.record_metadata.__getitem__ if metadata else dataset.__getitem__
    for ordinal in ordinals:
        try:
            read_one(ordinal)
        except Exception as alone:  # noqa: BLE001
            if not _is_damage(alone):
                return alone
            what = "the metadata of " if metadata else ""
            return CorruptShardError(
                f"{_where(dataset, ordinal, metadata)}: signal_dataset refuses {what}it "
                f"({type(alone).__name__}: {alone})"
            )
    return exc


def _where(dataset: sds.Dataset, ordinal: int, metadata: bool = False) -> str:
    try:
        (instruction,) = dataset.read_instructions(ordinal, ordinal + 1, metadata=metadata)
    except ValueError:
        # A reference dataset's shards cannot be addressed this way.
        return f"record {ordinal}"
    shard = instruction.filename.removeprefix("file://")
    return f"shard {shard}: record {ordinal} (record {instruction.skip} of the shard)"


@overload
def _plain(value: Mapping[str, object]) -> dict[str, object]: ...
@overload
def _plain(value: object) -> object: ...
def _plain(value: object) -> object:
    """Metadata as dicts and lists: signal_dataset's frozen mappings do not pickle."""
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _guessed_tensor_key(names: Sequence[str], name: str) -> str:
    # signal_dataset's encoder names tensors by sorted field name. The native
    # core only takes this as a hint and checks it against each descriptor.
    return f"tensor_{sorted(names).index(name):06d}"


def record_fields(record: sds.Record) -> tuple[FieldSpec, ...]:
    names = list(record.fields)
    return tuple(
        FieldSpec(
            name=name,
            tensor=_guessed_tensor_key(names, name),
            dtype_name=safetensors_name(record[name].data.dtype),
            shape=tuple(record[name].data.shape),
        )
        for name in sorted(names)
    )


def _write_row(
    ordinal: int,
    fields: Mapping[str, np.ndarray],
    metadata: Mapping[str, object],
    schema: Schema,
    outputs: Mapping[str, np.ndarray],
    position: int,
    start: int | None = None,
    pad: bool = False,
) -> None:
    for spec in schema.fields:
        data = fields.get(spec.name)
        if data is None or data.dtype != spec.dtype:
            raise SchemaMismatch(ordinal)
        found = FieldSpec(spec.name, spec.tensor, spec.dtype_name, tuple(data.shape), spec.window_axis)
        if found.layout_key() != spec.layout_key():
            raise SchemaMismatch(ordinal)
        if spec.window_axis is not None and start is not None:
            length = outputs[spec.name].shape[1 + spec.window_axis]
            data, valid = cut(data, spec.window_axis, start, length, pad, ordinal=ordinal, field=spec.name)
            if spec.name in schema.lengths:
                outputs[length_key(spec.name)][position] = valid
        outputs[spec.name][position] = data
    for target in schema.targets:
        if target.key not in metadata:
            raise_missing(target.key, ordinal, metadata.keys())
        outputs[target.key][position] = target_value(target.key, target.kind, metadata[target.key], ordinal)


#: The native path refuses floats from here on as int64 targets (the largest
#: double below 2**63 is 2**63 - 1024, and a bound with margin is simpler to state).
_INT64_FLOAT_BOUND = 9.2e18


def target_value(key: str, kind: str, value: object, ordinal: int) -> int | float:
    """`value` as an int64 (kind "i") or float64 ("f") target, refused as the native path refuses it.

    numpy would raise OverflowError for an integer outside int64 (and round
    a float past 2**63 to any value); the native path raises TargetError,
    and so does this.
    """
    if not (isinstance(value, bool) or isinstance(value, int | float)):
        raise_not_scalar(key, ordinal, value)
    if kind == "i":
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, int):
            if not -(1 << 63) <= value < (1 << 63):
                raise TargetError(
                    f"metadata {key!r} of record {ordinal} is {value}, which does not fit in int64; "
                    "targets are int64 or float64 (write it as a float to read it as one)"
                )
            return value
        if not (math.isfinite(value) and value.is_integer() and abs(value) < _INT64_FLOAT_BOUND):
            raise TargetError(
                f"metadata {key!r} of record {ordinal} is {value!r}, where the batch's "
                "first record holds an integer; write the key with one type throughout"
            )
        return int(value)
    try:
        return float(value)
    except OverflowError:
        raise TargetError(
            f"metadata {key!r} of record {ordinal} is an integer too large for float64"
        ) from None
