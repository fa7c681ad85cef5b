"""Annotation sets, read with the records they annotate.

signal_dataset keeps labels beside a dataset as annotation sets: one row per
ordinal, each an ordinary SDS record (SafeTensors tensors and a descriptor)
in the set's own ArrayRecord shards, with a status, tensor fields, JSON
values and provenance. Its `AnnotationSet.__getitem__` reads one row at a
time: a stat of the shard, a reader open and a metadata read for the identity
check, about half a millisecond a row. A detector's training loop wants the
rows of a whole batch, with the batch.

Here a batch's rows are read by the native core in one call, through the same
chunk reader as data records (verified, each chunk decompressed once), and
each row's identity is checked as signal_dataset checks it: its
`source_index` is the ordinal and its id the source record's, read from the
dataset's metadata shards. Rows hold different numbers of items, so the core
returns each requested tensor's items concatenated in batch order with a
count per row; they become ragged arrays with offsets, or padded arrays with
counts, without a Python step per row.

The set's shards are located from its own published documents, as
signal_dataset parsed and checked them when the dataset was opened (catalog,
set root, snapshot, density); this module reads only the shard list.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import signal_dataset as sds
from signal_dataset.annotation import SafeTensorsAnnotationCodec
from signal_dataset.storage.paths import join_uri

from sds_loader.checksums import VerifyChecksums
from sds_loader.dataset import ShardTable, local_root
from sds_loader.errors import MixedShapesError, SchemaMismatch
from sds_loader.metadata import MetadataShards
from sds_loader.schema import numpy_dtype
from sds_loader.storage import sources

#: How `Annotations(frequencies=...)` items give their edges.
FREQUENCY_EDGES = ("relative", "absolute")

#: Status codes of `<set>.status`, in signal_dataset's order.
STATUS_CODES = {"success": 0, "skipped": 1, "failed": 2}


@dataclass(frozen=True)
class Annotations:
    """Fields of one annotation set, to be read with every batch.

    Each field `F` of set `S` arrives as ``batch[f"{S}.{F}"]``. Ragged (the
    default): the rows' items concatenated along the first axis in batch
    order, with ``batch[f"{S}.offsets"]`` (B + 1 int64) saying where each
    row's items lie; nothing is padded, so a batch costs what its items
    weigh. Padded (``max_items=K``): shape ``(B, K, ...)`` filled with
    `pad_value` past each row's items, and ``batch[f"{S}.count"]``; a fixed
    shape is what a model's loss usually wants, at the price of K slots a row
    and an error (ValueError naming the record) for a row holding more.
    ``batch[f"{S}.status"]`` (uint8: 0 success, 1 skipped, 2 failed) comes in
    both modes; a row that is not a success has no items.

    The fields of one set are item-aligned (item i of `intervals` and item i
    of `freq` are one event): a row whose selected fields hold different
    numbers of items raises ValueError.

    `positions` maps a field to an axis of the records (``{"intervals":
    "time"}``): that field's items are half-open ``[start, stop)`` positions
    along the axis, shape ``(n, 2)``. Under a reader's `Window` on that axis,
    items that miss the window are dropped from every field of the set, and
    the kept ones are clipped to the window and shifted to its start, so they
    index the window's samples. Without a window they are returned as stored.
    signal_dataset defines no interval type: this is the producer's
    convention, declared here by the consumer.

    `frequencies` maps a field to how its items give frequency edges
    (``{"edges": "relative"}``): ``[low, high]`` pairs in Hz, shape
    ``(n, 2)``, ``"relative"`` to the capture's centre or ``"absolute"`` RF.
    Nothing moves them but a reader's augmentation chain
    (`sds_loader.augment.Chain`), under which they follow each transform as
    positions do (see `sds_loader.augment.labels`).
    """

    name: str
    fields: tuple[str, ...]
    max_items: int | None = None
    pad_value: float = 0
    positions: Mapping[str, str] = field(default_factory=dict)
    frequencies: Mapping[str, str] = field(default_factory=dict)

    def __init__(
        self,
        name: str,
        fields: Sequence[str],
        *,
        max_items: int | None = None,
        pad_value: float = 0,
        positions: Mapping[str, str] | None = None,
        frequencies: Mapping[str, str] | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"Annotations name must be an annotation set's name, not {name!r}")
        if isinstance(fields, str):
            fields = (fields,)
        names = tuple(fields)
        if not names or any(not isinstance(item, str) or not item for item in names):
            raise TypeError(
                f"Annotations({name!r}) fields must be one or more field names of the set, not {fields!r}"
            )
        if len(set(names)) != len(names):
            raise ValueError(f"Annotations({name!r}) names a field more than once: {list(names)}")
        if max_items is not None:
            if isinstance(max_items, bool) or not isinstance(max_items, numbers.Integral) or max_items < 0:
                raise ValueError(
                    f"Annotations({name!r}) max_items must be a non-negative integer or None "
                    f"(ragged), not {max_items!r}"
                )
            max_items = int(max_items)
        if isinstance(pad_value, bool) or not isinstance(pad_value, numbers.Real):
            raise TypeError(f"Annotations({name!r}) pad_value must be a number, not {pad_value!r}")
        mapping = dict(positions or {})
        for key, axis in mapping.items():
            if key not in names:
                raise ValueError(
                    f"Annotations({name!r}) positions= names field {key!r}, which is not among "
                    f"its fields {list(names)}; add it to fields="
                )
            if not isinstance(axis, str) or not axis:
                raise TypeError(
                    f"Annotations({name!r}) positions[{key!r}] must be an axis name, not {axis!r}"
                )
        edges = dict(frequencies or {})
        for key, mode in edges.items():
            if key not in names:
                raise ValueError(
                    f"Annotations({name!r}) frequencies= names field {key!r}, which is not among "
                    f"its fields {list(names)}; add it to fields="
                )
            if key in mapping:
                raise ValueError(
                    f"Annotations({name!r}) declares field {key!r} both as positions and as frequencies; "
                    "an item is one or the other"
                )
            if mode not in FREQUENCY_EDGES:
                raise ValueError(
                    f"Annotations({name!r}) frequencies[{key!r}] must be one of {list(FREQUENCY_EDGES)} "
                    f"(edges in Hz relative to the centre frequency, or absolute RF), not {mode!r}"
                )
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "fields", names)
        object.__setattr__(self, "max_items", max_items)
        object.__setattr__(self, "pad_value", pad_value)
        object.__setattr__(self, "positions", mapping)
        object.__setattr__(self, "frequencies", edges)

    def keys(self) -> tuple[str, ...]:
        """The batch keys this set adds."""
        extra = "offsets" if self.max_items is None else "count"
        return tuple(f"{self.name}.{item}" for item in (*self.fields, extra, "status"))


#: What moves a set's items under a reader's augmentation: (set, items by field,
#: count per row) -> (items, counts) after the chain and the window.
ItemMotion = Callable[
    ["Annotations", dict[str, np.ndarray], np.ndarray], tuple[dict[str, np.ndarray], np.ndarray]
]


@dataclass(frozen=True)
class FieldItems:
    """One field's items for a batch: all rows' items concatenated, and each row's count."""

    items: np.ndarray
    counts: np.ndarray


@dataclass(frozen=True)
class AnnotationRows:
    """What the core returns for one set and a batch of ordinals."""

    status: np.ndarray
    ids: list[str]
    fields: dict[str, FieldItems]


@dataclass
class _SetState:
    table: ShardTable
    native: Any
    source: Any
    #: Per field: (dtype, item shape), learned from the first row that holds it.
    layouts: dict[str, tuple[np.dtype[Any], tuple[int, ...]]]


class AnnotationSource:
    """The annotation sets of one dataset, for one process; not to be shared across a fork.

    Each set's shards get a native `ShardSet` of their own, and one more
    serves the dataset's metadata shards, which hold the ids rows are checked
    against. Shards are opened on first use and kept, as data shards are.
    """

    def __init__(
        self,
        dataset: sds.Dataset,
        metadata: MetadataShards,
        *,
        verify_checksums: VerifyChecksums,
        max_open_files: int,
    ) -> None:
        self._dataset = dataset
        self._verify = verify_checksums
        self._max_open_files = max_open_files
        self._sets: dict[str, _SetState] = {}
        # The reader opens annotation sets only where the core reads the dataset.
        assert metadata.table is not None, "annotation sets are read natively only"
        self._meta_table: ShardTable = metadata.table
        self._meta_source = metadata.source
        self._meta_native = metadata.native

    def _set(self, name: str) -> _SetState:
        state = self._sets.get(name)
        if state is not None:
            return state

        catalog = self._dataset.annotations
        if name not in catalog:
            shown = ", ".join(map(repr, sorted(catalog))) or "none"
            raise ValueError(
                f"dataset {self._dataset.root} has no annotation set {name!r}; its sets are {shown}. "
                "Publish one with signal_dataset.publish_annotations, or pass one of those names"
            )
        published = catalog[name]
        # The set's root document as signal_dataset parsed and checked it when
        # the dataset was opened; it has no public accessor for its shards.
        specification = published._specification
        paths: list[str] = []
        starts: list[int] = []
        for shard in specification.shards:
            uri = join_uri(published.root, shard.object.path)
            if uri.startswith("file://"):
                uri = uri[len("file://") :]
            paths.append(uri)
            starts.append(shard.first_ordinal)
        reason = sources.unavailable_reason(self._dataset, paths)
        if reason is not None:
            raise NotImplementedError(
                f"annotation set {name!r} cannot be read natively ({reason}); read its rows with "
                f"signal_dataset.open(uri).annotations[{name!r}][ordinal]"
            )
        starts.append(len(self._dataset))
        count = len(paths)
        table = ShardTable(
            paths=tuple(paths),
            starts=np.asarray(starts, dtype=np.int64),
            skips=np.zeros(count + 1, dtype=np.int64),
            files=np.asarray([*range(count), 0], dtype=np.int64),
            # Each shard is the size the set's root declares, as signal_dataset's catalog checks.
            sizes=np.asarray([shard.object.stored_bytes for shard in specification.shards], dtype=np.int64),
            root=local_root(self._dataset),
        )
        source = sources.for_shards(self._dataset, table.paths)
        native = table.native(self._verify, self._max_open_files, source)
        state = _SetState(table=table, native=native, source=source, layouts={})
        self._sets[name] = state
        return state

    def read(self, name: str, ordinals: np.ndarray, fields: Sequence[str]) -> AnnotationRows:
        """The rows of set `name` for `ordinals` (normalised), in one native call."""

        state = self._set(name)
        try:
            status, ids, raw = self.read_raw(name, ordinals, fields)
        except SchemaMismatch as mismatch:
            raise MixedShapesError(f"annotation set {name!r}: {mismatch}") from None
        out: dict[str, FieldItems] = {}
        for item, (dtype_name, item_shape, data, counts) in zip(fields, raw, strict=True):
            layout = state.layouts.get(item)
            if dtype_name:
                seen = (numpy_dtype(dtype_name), tuple(int(n) for n in item_shape))
                if layout is None:
                    state.layouts[item] = layout = seen
                elif seen != layout:
                    raise MixedShapesError(
                        f"annotation set {name!r} field {item!r} holds {seen[0]} items of shape "
                        f"{seen[1]} in this batch and {layout[0]} items of shape {layout[1]} in an "
                        "earlier one; every row must agree past the first axis"
                    )
            if layout is None:
                layout = state.layouts[item] = self._learn_layout(name, item)
            dtype, shape = layout
            out[item] = FieldItems(items=data.view(dtype).reshape(-1, *shape), counts=counts)
        return AnnotationRows(status=status, ids=ids, fields=out)

    def _learn_layout(self, name: str, item: str) -> tuple[np.dtype[Any], tuple[int, ...]]:
        """A field's dtype and item shape, from the first row that holds it.

        A batch in which no row holds a field still returns an (empty) array of
        the field's dtype, so rows are searched from the start of the set, 4096
        at a time; usually the first batch finds one. A field no row holds is
        a typo, and says so.
        """
        total = len(self._dataset)
        step = 4096
        for begin in range(0, total, step):
            ordinals = np.arange(begin, min(begin + step, total), dtype=np.int64)
            rows = self.read_raw(name, ordinals, [item])
            dtype_name, item_shape, _, _ = rows[2][0]
            if dtype_name:
                return numpy_dtype(dtype_name), tuple(int(n) for n in item_shape)
        raise ValueError(
            f"no row of annotation set {name!r} holds a field {item!r} (with status success); "
            "check the name against the fields its producer wrote"
        )

    def read_raw(self, name: str, ordinals: np.ndarray, fields: Sequence[str]) -> tuple[Any, ...]:
        """The native answer for set `name`'s rows: (status, ids, per field (dtype, shape, bytes, counts))."""
        from sds_loader import _native

        state = self._set(name)
        files, records = state.table.locate(ordinals)
        meta_files, meta_records = self._meta_table.locate(ordinals)
        # Shards in object storage a batch is the first to touch open in one round trip.
        for source, opened in ((state.source, files), (self._meta_source, meta_files)):
            if source is not None:
                source.open_shards(np.unique(opened).tolist())
        result: tuple[Any, ...] = _native.annotation_rows(
            state.native,
            self._meta_native,
            self._verify,
            files,
            records,
            meta_files,
            meta_records,
            ordinals,
            list(fields),
        )
        return result

    def values(self, name: str, ordinals: np.ndarray) -> list[dict[str, Any]]:
        """Each row's JSON values, provenance, status and detail, decoded by signal_dataset's codec.

        Not on a batch's path: JSON per row is Python work per row, which a
        training loop that wants only tensors should not pay.
        """
        from sds_loader import _native

        state = self._set(name)
        files, records = state.table.locate(ordinals)
        payloads = _native.record_bytes(state.native, self._verify, files, records)
        codec = SafeTensorsAnnotationCodec()
        out: list[dict[str, Any]] = []
        for ordinal, payload in zip(ordinals.tolist(), payloads, strict=True):
            if payload is None:
                raise NotImplementedError(
                    f"annotation set {name!r}: row {ordinal} is in a transposed chunk; read it with "
                    f"signal_dataset.open(uri).annotations[{name!r}][{ordinal}]"
                )
            record = codec.decode(payload)
            if record.source_index != ordinal:
                raise sds.CorruptDatasetError(
                    f"annotation set {name!r}: row {ordinal} says source_index {record.source_index}"
                )
            out.append(
                {
                    "status": record.status.value,
                    "values": _thaw(record.values),
                    "provenance": _thaw(record.provenance),
                    "detail_status": record.detail_status,
                }
            )
        return out

    def close(self) -> None:
        for state in self._sets.values():
            if state.source is not None:
                state.source.close()


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _thaw(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return [_thaw(item) for item in value]
    return value


def assemble(
    spec: Annotations,
    rows: AnnotationRows,
    ordinals: np.ndarray,
    *,
    window_axis: str | None = None,
    starts: np.ndarray | None = None,
    window_length: int | None = None,
    moved: ItemMotion | None = None,
) -> dict[str, np.ndarray]:
    """One set's batch arrays from its rows: clipped to the window, then ragged or padded.

    `moved` (a reader's augmentation) takes the place of the window's clip: it
    returns the items as the chain and then the window leave them.
    """
    batch = int(ordinals.size)
    counts: np.ndarray | None = None
    for item in spec.fields:
        field_counts = rows.fields[item].counts
        if counts is None:
            counts = field_counts
        elif not np.array_equal(field_counts, counts):
            k = int(np.flatnonzero(field_counts != counts)[0])
            described = {name: int(rows.fields[name].counts[k]) for name in spec.fields}
            raise ValueError(
                f"annotation set {spec.name!r}: record {int(ordinals[k])} holds {described} items, "
                "and the fields of one Annotations must be item-aligned (one offsets array); read "
                "fields with different item counts in separate readers"
            )
    assert counts is not None
    counts = counts.astype(np.int64, copy=False)
    items = {item: rows.fields[item].items for item in spec.fields}
    if moved is not None:
        items, counts = moved(spec, items, counts)
    elif window_axis is not None and starts is not None and window_length is not None:
        windowed = [item for item, axis in spec.positions.items() if axis == window_axis]
        if windowed:
            items, counts = _clip(spec, items, counts, windowed, starts.astype(np.int64), window_length)
    out: dict[str, np.ndarray] = {}
    status = np.asarray(rows.status, dtype=np.uint8)
    out[f"{spec.name}.status"] = status
    if spec.max_items is None:
        offsets = np.zeros(batch + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        for item in spec.fields:
            out[f"{spec.name}.{item}"] = np.ascontiguousarray(items[item])
        out[f"{spec.name}.offsets"] = offsets
        return out
    limit = spec.max_items
    over = np.flatnonzero(counts > limit)
    if over.size:
        k = int(over[0])
        raise ValueError(
            f"annotation set {spec.name!r}: record {int(ordinals[k])} holds {int(counts[k])} items, "
            f"more than max_items={limit}; raise max_items or read the set ragged (max_items=None)"
        )
    row_of = np.repeat(np.arange(batch, dtype=np.int64), counts)
    begins = np.zeros(batch, dtype=np.int64)
    np.cumsum(counts[:-1], out=begins[1:]) if batch > 1 else None
    slot = np.arange(row_of.size, dtype=np.int64) - begins[row_of]
    for item in spec.fields:
        values = items[item]
        padded = np.full((batch, limit, *values.shape[1:]), spec.pad_value, dtype=values.dtype)
        padded[row_of, slot] = values
        out[f"{spec.name}.{item}"] = padded
    out[f"{spec.name}.count"] = counts
    return out


def _clip(
    spec: Annotations,
    items: dict[str, np.ndarray],
    counts: np.ndarray,
    windowed: list[str],
    starts: np.ndarray,
    length: int,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Drop the items that miss each row's window, clip and shift the rest.

    An item is kept when ``[start, stop)`` overlaps ``[s, s + length)``; the
    kept positions are clipped to ``[s, s + length]`` and shifted by ``-s``.
    Items dropped by one positions field are dropped from every field of the
    set, so the fields stay item-aligned.
    """
    row_of = np.repeat(np.arange(counts.size, dtype=np.int64), counts)
    lows = starts[row_of]
    highs = lows + length
    keep = np.ones(row_of.size, dtype=bool)
    for item in windowed:
        positions = items[item]
        if positions.ndim != 2 or positions.shape[1] != 2:
            raise ValueError(
                f"annotation set {spec.name!r}: positions field {item!r} has items of shape "
                f"{positions.shape[1:]}, not (2,) [start, stop) pairs; drop it from positions="
            )
        keep &= (positions[:, 1] > lows) & (positions[:, 0] < highs)
    out = {item: values[keep] for item, values in items.items()}
    for item in windowed:
        positions = out[item]
        low = lows[keep].astype(positions.dtype)[:, None]
        high = highs[keep].astype(positions.dtype)[:, None]
        out[item] = np.minimum(np.maximum(positions, low), high) - low
    new_counts = np.bincount(row_of[keep], minlength=counts.size).astype(np.int64)
    return out, new_counts
