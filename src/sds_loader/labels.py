"""Record metadata as columns, class labels, and record ids.

Splits, class names and ids live in each record's metadata, which
signal_dataset also stores on its own, tensor-free, in the metadata shards:
a few hundred bytes of compact JSON a record. Reading them from there costs
one native call for a whole batch (verified like data) and never touches a
data record, so a split over a million records reads a few hundred MB of
metadata instead of the captures themselves.

The JSON is decoded in Python, once per record: columns are for choosing
records (a split, a class list read once), not for every batch. What a batch
needs per record natively (tensors, numeric targets, annotation rows) does
not come through here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import signal_dataset as sds

from sds_loader.addressing import shard_table
from sds_loader.checksums import VerifyChecksums
from sds_loader.errors import TargetError
from sds_loader.storage import sources

#: Records decoded per native call when a whole dataset is scanned.
_SCAN = 1 << 15


class MetadataShards:
    """The dataset's metadata shards, for one process; not to be shared across a fork."""

    def __init__(
        self, dataset: sds.Dataset, *, verify_checksums: VerifyChecksums, max_open_files: int = 64
    ) -> None:
        self.table = shard_table(dataset, metadata=True)
        self.source = sources.for_shards(dataset, self.table.paths)
        self.native = self.table.native(verify_checksums, max_open_files, self.source)
        self._verify = verify_checksums
        self._uri = dataset.root

    def documents(self, ordinals: np.ndarray) -> list[dict[str, Any]]:
        """Each record's metadata document (id, metadata, fields), in order."""
        from sds_loader import _native

        files, records = self.table.locate(ordinals)
        if self.source is not None:
            self.source.open_shards(np.unique(files).tolist())
        payloads = _native.record_bytes(self.native, self._verify, files, records)
        out: list[dict[str, Any]] = []
        for ordinal, payload in zip(ordinals.tolist(), payloads, strict=True):
            if payload is None:
                raise NotImplementedError(
                    f"the metadata of record {ordinal} of {self._uri} is in a transposed chunk, which "
                    "this reader does not decode; read it with signal_dataset's record_metadata"
                )
            out.append(json.loads(payload))
        return out

    def ids(self, ordinals: np.ndarray) -> list[str]:
        return [str(document["id"]) for document in self.documents(ordinals)]

    def columns(self, ordinals: np.ndarray, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """One array per metadata key over `ordinals` (see `column`)."""
        documents = self.documents(ordinals)
        ordinal_list = ordinals.tolist()
        return {
            key: column(key, [document.get("metadata", {}) for document in documents], ordinal_list)
            for key in keys
        }

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
