"""Serve records through signal_dataset's own reader, in a helper process.

Used where the native core cannot: transposed chunks, reference datasets whose
shards `read_instructions` refuses to address, and roots in stores the native
core has no source for (`gs://`). The results are the same arrays, filled in
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
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np
import signal_dataset as sds

from sds_loader import fallback_helper
from sds_loader.dtypes import safetensors_name
from sds_loader.errors import CorruptShardError, SchemaMismatch, TargetError
from sds_loader.record_metadata import RecordLayout, record_layout
from sds_loader.schema import FieldSpec, Schema, raise_missing, raise_not_scalar
from sds_loader.stores import for_this_process, portable
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

    def __init__(self, uri: str, object_store: sds.storage.ObjectStore | None = None) -> None:
        self._uri = uri
        self._store = object_store
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

    def close(self) -> None:
        """Stop this process's helper; the next read starts another."""
        with self._lock:
            helper, self._helper = self._helper, None
        if helper is not None and self._pid == os.getpid():
            _stop(helper)

    def __getstate__(self) -> dict[str, object]:
        return {"_uri": self._uri, "_store": portable(self._store), "_pid": None}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state, _helper=None, _dataset=None, _lock=threading.Lock())

    # -- internals ---------------------------------------------------------

    def _call(self, name: str, *args: object) -> Any:
        if self._pid != os.getpid():
            # Inherited across a fork: the parent's helper, dataset and lock
            # are not ours. Forgotten, not closed: the parent still uses them.
            self.__setstate__(
                {"_uri": self._uri, "_store": for_this_process(self._store), "_pid": os.getpid()}
            )
        if not self.in_helper:
            if self._dataset is None:
                self._dataset = sds.open(self._uri, object_store=self._store)
            return globals()[name](self._dataset, *args)
        with self._lock:
            if self._helper is None:
                self._helper = self._start()
            helper = self._helper
            assert helper.stdin is not None and helper.stdout is not None  # both are pipes
            try:
                fallback_helper.send(helper.stdin, (name, args))
                status, value = fallback_helper.receive(helper.stdout)
            except (EOFError, OSError) as exc:
                self._helper = None
                _stop(helper)
                raise sds.StorageError(
                    f"the helper process reading {self._uri} through signal_dataset ended "
                    f"(exit status {helper.returncode}); the next read starts a new one"
                ) from exc
        if status == "error":
            raise value
        return value

    def _start(self) -> subprocess.Popen[bytes]:
        helper = subprocess.Popen(
            # -c rather than -m: the package imports this module, which runpy warns about.
            [sys.executable, "-c", "from sds_loader.fallback_helper import main; main()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert helper.stdin is not None and helper.stdout is not None
        try:
            fallback_helper.send(helper.stdin, (self._uri, portable(self._store)))
            status, value = fallback_helper.receive(helper.stdout)
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
    return [record_layout(record) for record in dataset.record_metadata.__getitems__(ordinals)]


#: How array_record words a damaged Riegeli file in the RuntimeError it raises.
_RIEGELI_DAMAGE = ("Corrupted Riegeli", "Invalid Riegeli", "DATA_LOSS")


def _is_damage(exc: BaseException) -> bool:
    if isinstance(exc, sds.errors.ValidationError | sds.CorruptDatasetError):
        return True
    return isinstance(exc, RuntimeError) and any(word in str(exc) for word in _RIEGELI_DAMAGE)


def _blame(dataset: sds.Dataset, ordinals: list[int], exc: Exception) -> Exception:
    """signal_dataset's refusal of a damaged record, as the CorruptShardError
    the native path raises: naming the shard and the ordinal. A batch read
    does not say which record failed, so they are read again one by one; an
    error that is not damage (storage, arguments) is returned as it was."""
    if not _is_damage(exc):
        return exc
    for ordinal in ordinals:
        try:
            dataset[ordinal]
        except Exception as alone:  # noqa: BLE001
            if not _is_damage(alone):
                return alone
            return CorruptShardError(f"{_where(dataset, ordinal)}: signal_dataset refuses it: {alone}")
    return exc


def _where(dataset: sds.Dataset, ordinal: int) -> str:
    try:
        (instruction,) = dataset.read_instructions(ordinal, ordinal + 1, metadata=False)
    except ValueError:
        # A reference dataset's shards cannot be addressed this way.
        return f"record {ordinal}"
    shard = instruction.filename.removeprefix("file://")
    return f"shard {shard}: record {ordinal} (record {instruction.skip} of the shard)"


def _plain(value: object) -> Any:
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
        value = metadata[target.key]
        if not (isinstance(value, bool) or isinstance(value, int | float)):
            raise_not_scalar(target.key, ordinal, value)
        if target.kind == "i" and isinstance(value, float) and not value.is_integer():
            raise TargetError(
                f"metadata {target.key!r} of record {ordinal} is {value!r}, where the batch's "
                "first record holds an integer; write the key with one type throughout"
            )
        outputs[target.key][position] = value
