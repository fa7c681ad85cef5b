"""Record metadata, read from the metadata shards: field layouts, lengths, documents, columns, ids.

signal_dataset stores beside every data shard a metadata shard, aligned record
for record, whose records are compact JSON: the record's id, metadata, and each
field's dtype, shape and axes. Everything a reader needs to know about a record
before (or instead of) reading it comes from there: window crops, padding to a
batch's longest record and length-bucketed sampling need record lengths;
splits, class names and ids are metadata values. A few hundred bytes a record
instead of the record itself, read by one native call for a whole batch and
verified like data, so a split over a million records reads a few hundred MB
of metadata instead of the captures themselves.

One `MetadataShards` per reader serves all of it, over one native `ShardSet`
(annotation sets check their rows' ids against the same one). The shards are
read by the native core and decoded here, not through signal_dataset's
reader: that goes through array_record, whose reader, once used in a process,
crashes persistent forked DataLoader workers, and samplers run in the parent
before workers fork. Metadata shards in S3 and GCS are fetched as byte ranges
like data shards. What the native core cannot decode (a transposed chunk) or
address (a store it has no source for, a dataset it cannot table) is read
through signal_dataset in the fallback's helper process, the same way for
layouts and documents.

Documents are decoded in Python, once per record: columns are for choosing
records (a split, a class list read once), not for every batch. What a batch
needs per record natively (tensors, numeric targets, annotation rows) does not
come through here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import signal_dataset as sds
from signal_dataset.record.metadata import RecordMetadataCodec

from sds_loader.checksums import VerifyChecksums
from sds_loader.dataset import ShardTable, native_unavailable_reason, shard_table
from sds_loader.errors import TargetError
from sds_loader.fallback import FallbackReader
from sds_loader.schema import RecordLayout, axis_length, describe_axes, record_layout
from sds_loader.storage import sources
from sds_loader.storage.native_range import NativeRangeSource

#: Records decoded per native call when a whole dataset is scanned.
_SCAN = 1 << 15


class MetadataShards:
    """The dataset's metadata shards, for one process; not to be shared across a fork.

    `fallback` serves what the native core cannot read (a `FallbackReader`,
    which runs signal_dataset in a helper process).
    """

    def __init__(
        self,
        dataset: sds.Dataset,
        fallback: FallbackReader,
        *,
        verify_checksums: VerifyChecksums = True,
        max_open_files: int = 64,
    ) -> None:
        self._fallback = fallback
        self._verify = verify_checksums
        self._uri = dataset.root
        self._codec = RecordMetadataCodec()
        #: None where signal_dataset reads every record's metadata.
        self.table: ShardTable | None = None
        self.source: NativeRangeSource | None = None
        self.native: Any = None
        if native_unavailable_reason(dataset) is None and len(dataset) > 0:
            self.table = shard_table(dataset, metadata=True)
            self.source = sources.for_shards(dataset, self.table.paths)
            self.native = self.table.native(verify_checksums, max_open_files, self.source)

    def _payloads(self, ordinals: np.ndarray) -> list[bytes | None]:
        """Each record's metadata JSON, or None where the core does not decode its chunk."""
        from sds_loader import _native

        assert self.table is not None
        files, records = self.table.locate(ordinals)
        if self.source is not None:
            self.source.open_shards(np.unique(files).tolist())
        return list(_native.record_bytes(self.native, self._verify, files, records))

    def layouts(self, ordinals: np.ndarray) -> list[RecordLayout]:
        """The field layouts of each ordinal (already normalised), in order."""
        ordinals = np.asarray(ordinals, dtype=np.int64)
        if self.native is None:
            return self._fallback.record_layouts(ordinals.tolist())
        layouts: list[RecordLayout | None] = [
            None if payload is None else record_layout(self._codec.decode(payload))
            for payload in self._payloads(ordinals)
        ]
        missing = [k for k, layout in enumerate(layouts) if layout is None]
        if missing:
            found = self._fallback.record_layouts([int(ordinals[k]) for k in missing])
            for k, layout in zip(missing, found, strict=True):
                layouts[k] = layout
        return layouts  # type: ignore[return-value]

    def lengths(self, ordinals: np.ndarray, axis: str, fields: tuple[str, ...] | None = None) -> np.ndarray:
        """Each record's length along `axis`: the longest among `fields` (all when None)
        that carry it. A record where none carries it raises ValueError."""
        out = np.empty(len(ordinals), dtype=np.int64)
        for k, (ordinal, layout) in enumerate(
            zip(np.asarray(ordinals).tolist(), self.layouts(ordinals), strict=True)
        ):
            length = axis_length(layout, axis, fields)
            if length is None:
                raise ValueError(
                    f"record {ordinal} has no field with axis {axis!r}; its fields' axes are "
                    f"{describe_axes(layout, fields)}"
                )
            out[k] = length
        return out

    def documents(self, ordinals: np.ndarray) -> list[dict[str, Any]]:
        """Each record's metadata document (``id`` and ``metadata``, at least), in order."""
        ordinals = np.asarray(ordinals, dtype=np.int64)
        if self.native is None:
            return self._fallback.record_documents(ordinals.tolist())
        documents: list[dict[str, Any] | None] = [
            None if payload is None else json.loads(payload) for payload in self._payloads(ordinals)
        ]
        missing = [k for k, document in enumerate(documents) if document is None]
        if missing:
            found = self._fallback.record_documents([int(ordinals[k]) for k in missing])
            for k, document in zip(missing, found, strict=True):
                documents[k] = document
        return documents  # type: ignore[return-value]

    def ids(self, ordinals: np.ndarray) -> list[str]:
        return [str(document["id"]) for document in self.documents(ordinals)]

    def columns(self, ordinals: np.ndarray, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """One array per metadata key over `ordinals` (see `column`)."""
        return columns(self.documents(ordinals), keys, ordinals)

    def distinct(self, key: str, total: int) -> tuple[str, ...]:
        """The sorted distinct string values of `key` over records 0 .. total - 1."""
        seen: set[str] = set()
        for begin in range(0, total, _SCAN):
            ordinals = np.arange(begin, min(begin + _SCAN, total), dtype=np.int64)
            values = self.columns(ordinals, [key])[key]
            if values.dtype != object:
                raise TargetError(
                    f"metadata {key!r} of {self._uri} holds {values.dtype} values, not strings; "
                    "only string keys are class labels (numeric ones are targets as they are)"
                )
            seen.update(values.tolist())
        return tuple(sorted(seen))

    def close(self) -> None:
        if self.source is not None:
            self.source.close()


def columns(
    documents: Sequence[Mapping[str, Any]], keys: Sequence[str], ordinals: np.ndarray
) -> dict[str, np.ndarray]:
    """One array per metadata key of the records' `documents` (see `column`)."""
    ordinal_list = np.asarray(ordinals).tolist()
    metadata = [document.get("metadata", {}) for document in documents]
    return {key: column(key, metadata, ordinal_list) for key in keys}


def column(key: str, metadata: Sequence[Mapping[str, Any]], ordinals: Sequence[int]) -> np.ndarray:
    """Values of `key` as one array: bool, int64, float64 (integers mixed with
    floats), or an object array of str. A record without the key, or a value
    of another kind (a list, a null, a string among numbers), raises
    TargetError naming the record."""
    values: list[Any] = []
    for ordinal, document in zip(ordinals, metadata, strict=True):
        if key not in document:
            raise TargetError(
                f"record {ordinal} has no metadata key {key!r} (its metadata has {sorted(document)}); "
                "pass keys every record carries"
            )
        value = document[key]
        if not isinstance(value, bool | int | float | str):
            raise TargetError(
                f"metadata {key!r} of record {ordinal} is {type(value).__name__} {value!r}; columns "
                "hold strings, numbers or bools (read structured metadata with signal_dataset's "
                "record_metadata)"
            )
        values.append(value)
    if not values:
        return np.empty(0, dtype=object)
    kinds = {_kind(value) for value in values}
    if kinds == {"b"}:
        return np.asarray(values, dtype=bool)
    if kinds == {"i"}:
        return np.asarray(values, dtype=np.int64)
    if kinds <= {"i", "f"}:
        return np.asarray(values, dtype=np.float64)
    if kinds == {"s"}:
        out = np.empty(len(values), dtype=object)
        out[:] = values
        return out
    first = {kind: k for k, kind in reversed(list(enumerate(map(_kind, values))))}
    shown = ", ".join(
        f"record {ordinals[k]}: {type(values[k]).__name__} {values[k]!r}" for k in sorted(first.values())
    )
    raise TargetError(f"metadata {key!r} mixes kinds of values ({shown}); one column holds one kind")


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "b"
    if isinstance(value, int):
        return "i"
    if isinstance(value, float):
        return "f"
    return "s"


def class_indices(key: str, values: np.ndarray, classes: Sequence[str], ordinals: np.ndarray) -> np.ndarray:
    """int64 index of each value in `classes`; a value not in it raises TargetError."""
    index = {name: k for k, name in enumerate(classes)}
    out = np.empty(values.size, dtype=np.int64)
    for k, value in enumerate(values.tolist()):
        found = index.get(value)
        if found is None:
            raise TargetError(
                f"metadata {key!r} of record {int(ordinals[k])} is {value!r}, which is not among the "
                f"classes {list(classes)}; add it to labels={{{key!r}: [...]}} or leave the key out "
                "of labels= to use every value the dataset holds"
            )
        out[k] = found
    return out
