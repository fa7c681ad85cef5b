"""Record metadata (fields' dtypes, shapes and axes) without reading any tensor.

signal_dataset stores beside every data shard a metadata shard, aligned record
for record, whose records are compact JSON: the record's id, metadata, and each
field's dtype, shape and axes. Window crops, padding to a batch's longest
record and length-bucketed sampling all need record lengths before any data is
read, and this is where they come from: a few hundred bytes a record instead of
the record itself.

The shards are read by the native core and decoded by signal_dataset's own
metadata codec. Not through signal_dataset's reader: that goes through
array_record, whose reader, once used in a process, crashes persistent forked
DataLoader workers, and samplers run in the parent before workers fork.
Metadata shards in S3 and GCS are fetched as byte ranges like data shards. Datasets
the native core cannot address (stores it has no source for, reference datasets) are read
through signal_dataset in the fallback's helper process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import signal_dataset as sds
from signal_dataset.record.metadata import RecordMetadataCodec

from sds_loader.addressing import native_unavailable_reason, shard_table
from sds_loader.checksums import VerifyChecksums
from sds_loader.storage import sources

if TYPE_CHECKING:
    from sds_loader.storage.fallback import FallbackReader


class FieldLayout(NamedTuple):
    """One field of one record, as its metadata describes it."""

    shape: tuple[int, ...]
    axes: tuple[str, ...]


#: Field name -> layout, for one record.
RecordLayout = dict[str, FieldLayout]


def record_layout(record: sds.RecordMetadata) -> RecordLayout:
    return {
        name: FieldLayout(tuple(int(n) for n in item.shape), tuple(axis.name for axis in item.axes))
        for name, item in record.fields.items()
    }


class MetadataSource:
    """Reads each record's field layouts by ordinal for one process; not to be shared across a fork.

    `fallback` serves what the native core cannot address (a
    `fallback.FallbackReader`, which runs signal_dataset in a helper process).
    """

    def __init__(
        self, dataset: sds.Dataset, fallback: FallbackReader, *, verify_checksums: VerifyChecksums = True
    ) -> None:
        self._fallback = fallback
        self._verify = verify_checksums
        self._codec = RecordMetadataCodec()
        self._native = None
        self._table = None
        self._source = None
        if native_unavailable_reason(dataset) is None and len(dataset) > 0:
            self._table = shard_table(dataset, metadata=True)
            self._source = sources.for_shards(dataset, self._table.paths)
            self._native = self._table.native(self._verify, 64, self._source)

    def read(self, ordinals: np.ndarray) -> list[RecordLayout]:
        """The field layouts of each ordinal (already normalised), in order."""
        ordinals = np.asarray(ordinals, dtype=np.int64)
        if self._native is None:
            return self._fallback.record_layouts(ordinals.tolist())
        from sds_loader import _native

        assert self._table is not None
        files, shard_records = self._table.locate(ordinals)
        if self._source is not None:
            self._source.open_shards(np.unique(files).tolist())
        payloads = _native.record_bytes(self._native, self._verify, files, shard_records)
        layouts: list[RecordLayout | None] = [
            None if payload is None else record_layout(self._codec.decode(payload)) for payload in payloads
        ]
        missing = [k for k, layout in enumerate(layouts) if layout is None]
        if missing:
            # Transposed metadata chunks: signal_dataset decodes those.
            found = self._fallback.record_layouts([int(ordinals[k]) for k in missing])
            for k, layout in zip(missing, found, strict=True):
                layouts[k] = layout
        return layouts  # type: ignore[return-value]

    def lengths(self, ordinals: np.ndarray, axis: str, fields: tuple[str, ...] | None = None) -> np.ndarray:
        """Each record's length along `axis`: the longest among `fields` (all when None)
        that carry it. A record where none carries it raises ValueError."""
        out = np.empty(len(ordinals), dtype=np.int64)
        for k, (ordinal, layout) in enumerate(
            zip(np.asarray(ordinals).tolist(), self.read(ordinals), strict=True)
        ):
            length = axis_length(layout, axis, fields)
            if length is None:
                raise ValueError(
                    f"record {ordinal} has no field with axis {axis!r}; its fields' axes are "
                    f"{describe_axes(layout, fields)}"
                )
            out[k] = length
        return out


def axis_length(layout: RecordLayout, axis: str, fields: tuple[str, ...] | None = None) -> int | None:
    lengths = [
        layout[name].shape[layout[name].axes.index(axis)]
        for name in (fields if fields is not None else tuple(layout))
        if name in layout and axis in layout[name].axes
    ]
    return max(lengths) if lengths else None


def describe_axes(layout: RecordLayout, fields: tuple[str, ...] | None = None) -> dict[str, tuple[str, ...]]:
    names = fields if fields is not None else tuple(sorted(layout))
    return {name: layout[name].axes for name in names if name in layout}
