"""What one batch looks like: dtypes, the selected fields' shapes, and the arrays that hold them.

A batch is one array per field, so its layout must be known before the first
byte is decoded. The reader assumes the layout of the batch before (or, for the
first batch, of its first record) and lets the native core confirm every record
against it. A record that disagrees costs one slower pass over that batch, not
a per-record check in Python on every batch.

Dtypes are SafeTensors names on disk, all little-endian. numpy has no
bfloat16, and signal_dataset 0.4 writes none, so a record holding one is
reported rather than guessed at. A batch's arrays are allocated here, or the
caller's (`out=`, `allocator=`) checked in full before anything is written.

A reader's layouts (`Layouts`: one record's probed natively or through
signal_dataset, a batch's confirmed and read again under the layout its
records share when the assumed one failed) and the core's form of the last
layout read (`cached_native_layout`) are here too.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn, Protocol, cast

import numpy as np
import signal_dataset as sds

from sds_loader.errors import (
    MixedShapesError,
    SchemaMismatch,
    TargetError,
    UnknownNameError,
    UnknownTargetError,
)
from sds_loader.windows import Window, length_key

if TYPE_CHECKING:
    from typing_extensions import Buffer

    from sds_loader._native import BatchLayout

# -- dtypes ------------------------------------------------------------------

SAFETENSORS_TO_NUMPY: dict[str, np.dtype] = {
    "BOOL": np.dtype("?"),
    "U8": np.dtype("u1"),
    "I8": np.dtype("i1"),
    "U16": np.dtype("<u2"),
    "I16": np.dtype("<i2"),
    "U32": np.dtype("<u4"),
    "I32": np.dtype("<i4"),
    "U64": np.dtype("<u8"),
    "I64": np.dtype("<i8"),
    "F16": np.dtype("<f2"),
    "F32": np.dtype("<f4"),
    "F64": np.dtype("<f8"),
    "C64": np.dtype("<c8"),
}


def numpy_dtype(name: str) -> np.dtype:
    try:
        return SAFETENSORS_TO_NUMPY[name]
    except KeyError:
        raise TypeError(
            f"SafeTensors dtype {name!r} has no numpy equivalent; sds-loader reads "
            f"{', '.join(SAFETENSORS_TO_NUMPY)}"
        ) from None


def safetensors_name(dtype: np.dtype) -> str:
    normalized = np.dtype(dtype).newbyteorder("<") if np.dtype(dtype).itemsize > 1 else np.dtype(dtype)
    for name, candidate in SAFETENSORS_TO_NUMPY.items():
        if candidate == normalized:
            return name
    raise TypeError(f"numpy dtype {dtype} has no SafeTensors equivalent")


# -- a batch's layout --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FieldSpec:
    name: str
    #: The SafeTensors key holding this field, from the record's descriptor.
    tensor: str
    #: SafeTensors dtype name, e.g. "C64".
    dtype_name: str
    #: The shape of the field in a batch row: a window's length along the
    #: window's axis, the record's own shape elsewhere.
    shape: tuple[int, ...]
    #: Which axis of `shape` a window cuts, or None when the field is read whole.
    window_axis: int | None = None

    def windowed(self, length: int) -> FieldSpec:
        if self.window_axis is None:
            return self
        shape = list(self.shape)
        shape[self.window_axis] = length
        return FieldSpec(self.name, self.tensor, self.dtype_name, tuple(shape), self.window_axis)

    def layout_key(self) -> tuple[str, str, tuple[int, ...]]:
        """What records must agree on to share a batch: all but the window's axis."""
        shape = list(self.shape)
        if self.window_axis is not None:
            shape[self.window_axis] = -1
        return (self.name, self.dtype_name, tuple(shape))

    @property
    def dtype(self) -> np.dtype:
        return numpy_dtype(self.dtype_name)

    def describe(self) -> str:
        return f"{self.name}: {self.dtype} {self.shape}"


@dataclass(frozen=True, slots=True)
class TargetSpec:
    key: str
    #: "i" for int64 (integers and bools), "f" for float64 (other numbers).
    kind: str

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.int64) if self.kind == "i" else np.dtype(np.float64)


@dataclass(frozen=True, slots=True)
class Schema:
    fields: tuple[FieldSpec, ...]
    targets: tuple[TargetSpec, ...]
    #: Fields whose valid window positions come back as ``<field>_length``.
    lengths: tuple[str, ...] = ()

    def describe(self) -> str:
        return ", ".join(field.describe() for field in self.fields)

    def windowed(self, length: int) -> Schema:
        """This layout with every windowed field cut to `length` along the window's axis."""
        return Schema(tuple(f.windowed(length) for f in self.fields), self.targets, self.lengths)

    def same_layout(self, other: Schema) -> bool:
        return [f.layout_key() for f in self.fields] == [f.layout_key() for f in other.fields]


def native_layout(schema: Schema) -> BatchLayout:
    """The native core's form of `schema`, checked once: each read then passes only its buffers,
    by name, rather than the schema rebuilt as arguments batch after batch."""
    from sds_loader import _native

    layout = _native.BatchLayout()
    for spec in schema.fields:
        layout.add_field(
            spec.name,
            spec.tensor,
            spec.dtype_name,
            spec.shape,
            window_axis=spec.window_axis,
            lengths=length_key(spec.name) if spec.name in schema.lengths else None,
        )
    for target in schema.targets:
        layout.add_target(target.key, target.kind)
    return layout


def target_kind(value: object, *, key: str, ordinal: int) -> str:
    """Classify one metadata value, refusing anything that is not a scalar number."""
    if isinstance(value, bool) or isinstance(value, int):
        return "i"
    if isinstance(value, float):
        return "f"
    if value is None:
        raise_missing(key, ordinal)
    raise_not_scalar(key, ordinal, value)
    raise AssertionError("unreachable")


def raise_missing(key: str, ordinal: int, available: Iterable[str] | None = None) -> NoReturn:
    hint = f" (its metadata has {sorted(available)})" if available is not None else ""
    raise TargetError(
        f"record {ordinal} has no metadata key {key!r}{hint}; pass targets= with keys every record carries"
    )


def raise_not_scalar(key: str, ordinal: int, value: object) -> NoReturn:
    raise TargetError(
        f"metadata {key!r} of record {ordinal} is {type(value).__name__} {value!r}, not a "
        "number or bool; targets must be scalars (read structured metadata through "
        "signal_dataset's record_metadata instead)"
    )


# -- records' layouts, as their metadata describes them ---------------------


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


# -- a batch's arrays: allocated, or the caller's checked -------------------

#: Allocates one uninitialised array; a pool or shared-memory allocator can
#: stand in for numpy's so that a batch is written where it will be consumed.
Allocator = Callable[[tuple[int, ...], np.dtype], np.ndarray]


def allocate(schema: Schema, batch: int, allocator: Allocator | None = None) -> dict[str, np.ndarray]:
    """One fresh array per field, target and length, from `allocator` (numpy's by default).

    What a caller's allocator returns is checked as `out=` buffers are, naming
    `allocator=`: a wrong shape or dtype, or an object without the buffer
    protocol, is refused before anything is written.
    """
    if allocator is None:
        return {name: np.empty((batch, *row), dtype) for name, row, dtype in _rows(schema)}
    layout = expected_layout(schema, batch)
    made = {name: allocator(shape, dtype) for name, (shape, dtype) in layout.items()}
    return _checked(made, layout, argument="allocator=", what="what allocator= returned for {name!r}")


def expected_layout(schema: Schema, batch: int) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    return {name: ((batch, *row), dtype) for name, row, dtype in _rows(schema)}


#: The last schema's arrays as (name, shape of one row, dtype). Every batch
#: of a reader has the same schema object, and working these out again took
#: a microsecond of a batch of 16 short records.
_last_rows: tuple[Schema, tuple[tuple[str, tuple[int, ...], np.dtype], ...]] | None = None


def _rows(schema: Schema) -> tuple[tuple[str, tuple[int, ...], np.dtype], ...]:
    global _last_rows
    last = _last_rows
    if last is not None and last[0] is schema:
        return last[1]
    rows = tuple((spec.name, tuple(spec.shape), spec.dtype) for spec in schema.fields)
    rows += tuple((target.key, (), target.dtype) for target in schema.targets)
    rows += tuple((length_key(name), (), np.dtype(np.int64)) for name in schema.lengths)
    _last_rows = (schema, rows)
    return rows


def adopt(out: Mapping[str, object], schema: Schema, batch: int) -> dict[str, np.ndarray]:
    """View the caller's buffers as arrays, refusing any that do not fit exactly."""
    if not isinstance(out, Mapping):
        raise TypeError(f"out= must map names to buffers, not {type(out).__name__}")
    layout = expected_layout(schema, batch)
    unknown = sorted(set(out) - set(layout))
    missing = sorted(set(layout) - set(out))
    if unknown or missing:
        raise ValueError(
            f"out= names {sorted(out)} but this reader returns {sorted(layout)}"
            + (f"; missing {missing}" if missing else "")
            + (f"; unexpected {unknown}" if unknown else "")
        )
    return _checked(out, layout, argument="out=", what="out[{name!r}]")


def batch_buffers(
    layout: Schema,
    rows: int,
    *,
    out: Mapping[str, object] | None,
    allocator: Allocator | None,
    window: Window | None,
    window_length: int | None,
) -> dict[str, np.ndarray]:
    """A batch's arrays under `layout`: the caller's `out` checked, else fresh ones.

    With a window, each field holds `window_length` positions of its axis; a
    length no batch can be allocated for is the window's fault, and said so.
    """
    if window_length is not None:
        layout = layout.windowed(window_length)
    if out is not None:
        return adopt(out, layout, rows)
    try:
        return allocate(layout, rows, allocator)
    except (ValueError, MemoryError) as exc:
        if window_length is None or allocator is not None:
            raise
        raise ValueError(
            f"window={window!r} asks for rows of {window_length} positions: a batch of "
            f"{rows} with them cannot be allocated ({exc}); pass a Window of a "
            "length the records can hold"
        ) from None


def _checked(
    buffers: Mapping[str, object],
    layout: dict[str, tuple[tuple[int, ...], np.dtype]],
    *,
    argument: str,
    what: str,
) -> dict[str, np.ndarray]:
    """`buffers` viewed as arrays, each checked against `layout`; `what` names one in messages."""
    arrays: dict[str, np.ndarray] = {}
    for name, (shape, dtype) in layout.items():
        buffer = cast("Buffer", buffers[name])  # if it is none, memoryview() raises TypeError
        label = what.format(name=name)
        try:
            array = np.asarray(buffer) if isinstance(buffer, np.ndarray) else np.asarray(memoryview(buffer))
        except TypeError:
            raise TypeError(
                f"{label} is a {type(buffer).__name__}, which does not expose the "
                f"buffer protocol; {argument} takes numpy arrays (for a torch tensor, tensor.numpy())"
            ) from None
        if array.dtype != dtype:
            raise ValueError(f"{label} has dtype {array.dtype}; this batch needs {dtype}")
        if tuple(array.shape) != shape:
            raise ValueError(f"{label} has shape {tuple(array.shape)}; this batch needs {shape}")
        if not array.flags.c_contiguous:
            raise ValueError(
                f"{label} is not C-contiguous; pass np.ascontiguousarray(...) or a freshly allocated buffer"
            )
        if not array.flags.writeable:
            raise ValueError(f"{label} is read-only; pass a writable buffer")
        arrays[name] = array
    _refuse_overlap(arrays, argument)
    return arrays


def _refuse_overlap(arrays: dict[str, np.ndarray], argument: str) -> None:
    """Two buffers sharing memory would each receive the other's rows:
    refuse them, naming both, before anything is written."""
    names = sorted(arrays)
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            if arrays[first].nbytes and np.shares_memory(arrays[first], arrays[second]):
                raise ValueError(
                    f"{argument} gave {first!r} and {second!r} buffers that share memory; every field "
                    "and target needs a buffer of its own"
                )


# -- probing: a batch's layout from one record's --------------------------------


def select_fields(
    available: tuple[FieldSpec, ...], fields: tuple[str, ...] | None, *, ordinal: int, uri: str
) -> tuple[FieldSpec, ...]:
    """The record's fields that `fields=` selects (all when None), in its order."""
    if fields is None:
        return available
    by_name = {spec.name: spec for spec in available}
    missing = [name for name in fields if name not in by_name]
    if missing:
        raise UnknownNameError(
            argument="fields=", name=missing[0], available=list(by_name), ordinal=ordinal, uri=uri
        )
    return tuple(by_name[name] for name in fields)


def target_spec(key: str, metadata: Mapping[str, object], *, ordinal: int, uri: str) -> TargetSpec:
    if key not in metadata:
        raise UnknownTargetError(
            argument="targets=", name=key, available=list(metadata), ordinal=ordinal, uri=uri
        )
    return TargetSpec(key=key, kind=target_kind(metadata[key], key=key, ordinal=ordinal))


def check_no_clash(fields: tuple[FieldSpec, ...], targets: tuple[str, ...]) -> None:
    clash = sorted({spec.name for spec in fields} & set(targets))
    if clash:
        raise ValueError(
            f"{clash[0]!r} names both a field and a target, and a batch has one array per "
            "name; select the field with fields= or drop the target"
        )


def window_axes(layout: RecordLayout, axis: str, names: tuple[str, ...] | None) -> dict[str, int]:
    """Where `axis` sits in each of the fields `names` (all when None) of a record that has it."""
    axes: dict[str, int] = {}
    for name in names if names is not None else tuple(layout):
        if name in layout and axis in layout[name].axes:
            axes[name] = layout[name].axes.index(axis)
    if not axes:
        raise ValueError(
            f"no selected field has axis {axis!r} to window; the fields' axes are "
            f"{describe_axes(layout, names)}. Pass Window() one of those axis names."
        )
    return axes


def windowed_fields(
    fields: tuple[FieldSpec, ...], axes: Mapping[str, int], *, pad: bool, targets: tuple[str, ...]
) -> tuple[tuple[FieldSpec, ...], tuple[str, ...]]:
    """`fields` with their window axes, and the fields whose lengths a padded window returns."""
    fields = tuple(
        FieldSpec(spec.name, spec.tensor, spec.dtype_name, spec.shape, axes.get(spec.name)) for spec in fields
    )
    if not pad:
        return fields, ()
    lengths = tuple(spec.name for spec in fields if spec.name in axes)
    taken = {spec.name for spec in fields} | set(targets)
    for name in lengths:
        if length_key(name) in taken:
            raise ValueError(
                f"a padded window returns {length_key(name)!r} beside field {name!r}, "
                "and that name is already selected; rename or drop the field or target"
            )
    return fields, lengths


def uniform_schema(schemas: Mapping[int, Schema]) -> Schema:
    """The one layout the records' `schemas` (by ordinal) share, or MixedShapesError naming them."""
    layouts: dict[tuple[tuple[str, str, tuple[int, ...]], ...], list[int]] = {}
    first: dict[tuple[tuple[str, str, tuple[int, ...]], ...], Schema] = {}
    for ordinal, schema in schemas.items():
        key = tuple(f.layout_key() for f in schema.fields)
        layouts.setdefault(key, []).append(ordinal)
        first.setdefault(key, schema)
    if len(layouts) == 1:
        return next(iter(first.values()))
    lines = []
    for key, members in layouts.items():
        shown = ", ".join(map(str, members[:8])) + (" ..." if len(members) > 8 else "")
        lines.append(f"  records [{shown}]: {first[key].describe()}")
    raise MixedShapesError(
        "this batch mixes record layouts, so it cannot be stacked into one array per "
        "field:\n" + "\n".join(lines) + "\nRead them in separate batches, or select "
        "only fields that agree with fields=."
    )


class ProbedState(Protocol):
    """What probing needs of a reader's state in this process (a `ProcessState`)."""

    native: Any
    table: Any
    fallback: Any
    dataset: Any
    #: The schema last read natively, and the core's form of it.
    layout: tuple[Schema, Any] | None

    @property
    def metadata(self) -> Any: ...


def record_window_axes(
    state: ProbedState, ordinal: int, window: Window, names: Sequence[str] | None
) -> dict[str, int]:
    """Where the window's axis sits in each field `names` of record `ordinal` that has it."""
    layout = state.metadata.layouts(np.asarray([ordinal], dtype=np.int64))[0]
    return window_axes(layout, window.axis, tuple(names) if names is not None else None)


def cached_native_layout(state: ProbedState, schema: Schema) -> BatchLayout:
    """The core's form of `schema`, built once per schema in this process: a batch passes only its arrays."""
    layout = state.layout
    if layout is None or layout[0] is not schema:
        layout = state.layout = (schema, native_layout(schema))
    return cast("BatchLayout", layout[1])


class PromotedLabels(Protocol):
    """What layouts need of a reader's labels (an `extras.Labels`, which imports this module)."""

    #: The targets still read as numbers.
    targets: tuple[str, ...]

    def promote(
        self,
        keys: Iterable[str],
        given: Mapping[str, tuple[str, ...]],
        distinct: Callable[[str], tuple[str, ...]] | None,
    ) -> None: ...


class Layouts:
    """A reader's record layouts: probed from one record, confirmed by every batch, the last kept.

    A batch is read under the layout of the batch before (the first batch
    under its first record's) and the core checks every record against it.
    When one disagrees, each distinct record of the batch is probed and the
    batch read once more under the layout they share, else MixedShapesError.
    Probing a record whose targets hold strings makes those targets class
    labels (`extras.Labels`), their classes learnt from the metadata.
    """

    def __init__(
        self, *, uri: str, fields: tuple[str, ...] | None, window: Window | None, labels: PromotedLabels
    ) -> None:
        self.uri = uri
        self.fields = fields
        self.window = window
        self.labels = labels
        #: The layout of the last batch read, or of the last record probed before any.
        self.last: Schema | None = None

    def probe(self, state: ProbedState, ordinal: int, fetched: Callable[[], None]) -> Schema:
        """Learn record `ordinal`'s layout: its fields' dtypes and shapes, its targets' kinds.

        `fetched` counts what the probe fetched, even when it fails.
        """
        probed = None
        if state.native is not None:
            assert state.table is not None
            files, locals_ = state.table.locate(np.asarray([ordinal], dtype=np.int64))
            try:
                probed = state.native.probe(int(files[0]), int(locals_[0]), ordinal)
            finally:
                fetched()
        if probed is not None:
            raw_fields, metadata_json = probed
            available = tuple(
                FieldSpec(name=name, tensor=key, dtype_name=dtype, shape=tuple(shape))
                for name, key, dtype, shape in raw_fields
            )
            metadata = json.loads(metadata_json)
        else:
            available, metadata = state.fallback.probe(ordinal)
        selected = select_fields(available, self.fields, ordinal=ordinal, uri=self.uri)
        strings = [key for key in self.labels.targets if isinstance(metadata.get(key), str)]
        records = len(state.dataset)
        self.labels.promote(strings, {}, lambda key: state.metadata.distinct(key, records))
        targets = self.labels.targets
        check_no_clash(selected, targets)
        lengths: tuple[str, ...] = ()
        if self.window is not None:
            axes = record_window_axes(state, ordinal, self.window, [spec.name for spec in selected])
            selected, lengths = windowed_fields(selected, axes, pad=self.window.pad, targets=targets)
        return Schema(
            fields=selected,
            targets=tuple(target_spec(key, metadata, ordinal=ordinal, uri=self.uri) for key in targets),
            lengths=lengths,
        )

    def check_names(self, state: ProbedState, fetched: Callable[[], None]) -> None:
        """Check the fields and targets asked for against record 0 (kept as the first layout).

        Safe before forking DataLoader workers whatever the dataset: records
        only signal_dataset can read are read in a helper process. A corrupt
        record 0 is left to the first batch that holds it, so that the rest
        of its dataset stays readable. A reader that names nothing reads no
        record here: the first batch learns the layout from its own first
        record, once the shards it touches are open (in object storage, all
        in one round trip and without reading record 0).
        """
        if len(state.dataset) == 0:
            return
        if self.fields is None and not self.labels.targets and self.window is None:
            return
        try:
            self.known(state, 0, fetched)
        except sds.CorruptDatasetError:
            pass

    def known(self, state: ProbedState, ordinal: int, fetched: Callable[[], None]) -> Schema:
        """The last layout, or record `ordinal`'s when none is known yet (then kept)."""
        if self.last is None:
            self.last = self.probe(state, ordinal, fetched)
        return self.last

    def read(
        self,
        state: ProbedState,
        ordinals: np.ndarray,
        started: float,
        read: Callable[[Schema, float], dict[str, np.ndarray]],
        *,
        fetched: Callable[[], None],
        retried: Callable[[], None],
    ) -> dict[str, np.ndarray]:
        """Read a non-empty batch with `read(layout, started)` under the layout it should have.

        `started` times the read's Python stage; `retried` counts a second read.
        """
        schema = self.known(state, int(ordinals[0]), fetched)
        try:
            arrays = read(schema, started)
        except SchemaMismatch:
            started = time.perf_counter()  # the failed read's time is counted already
            retried()
            probed = {
                ordinal: self.probe(state, ordinal, fetched) for ordinal in np.unique(ordinals).tolist()
            }
            schema = uniform_schema(probed)
            try:
                arrays = read(schema, started)
            except SchemaMismatch as again:
                # Every record agreed when probed one by one, yet not when read
                # together: report it as the layout problem it is.
                raise MixedShapesError(f"{again}; batch layout {schema.describe()}") from None
        self.last = schema
        return arrays
