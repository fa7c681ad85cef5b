"""What a batch carries beside its fields and targets, and the checks of the arguments that ask for it.

Annotation sets (`annotations=`), class indices of string metadata
(`labels=`) and provenance (`extras=`: each row's ordinal, record id and
window start) all come from the metadata and annotation shards, read for
the whole batch once its records are read. Their arguments are checked when
the reader is made, so that a typo fails there rather than in a worker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from sds_loader.annotations import Annotations, ItemMotion, assemble
from sds_loader.metadata import class_indices, columns
from sds_loader.windows import Window

if TYPE_CHECKING:
    from sds_loader.process_state import ProcessState


#: What extras= may ask for.
EXTRAS = ("ordinal", "id", "start")


def annotation_specs(values: Sequence[Annotations]) -> tuple[Annotations, ...]:
    specs = (values,) if isinstance(values, Annotations) else tuple(values)
    for spec in specs:
        if not isinstance(spec, Annotations):
            raise TypeError(
                f"annotations= takes sds_loader.Annotations(...) items, not {type(spec).__name__}"
            )
    set_names = [spec.name for spec in specs]
    if len(set(set_names)) != len(set_names):
        raise ValueError(
            f"annotations= names set(s) more than once: {set_names}; list each set's fields once"
        )
    return specs


def extra_names(values: Sequence[str], window: Window | None) -> tuple[str, ...]:
    chosen = names("extras", values)
    for name in chosen:
        if name not in EXTRAS:
            raise ValueError(f"extras= takes {list(EXTRAS)}, not {name!r}")
    if "start" in chosen and window is None:
        raise ValueError('extras=("start",) returns window starts, and this reader has no window')
    return chosen


def names(argument: str, values: Sequence[str]) -> tuple[str, ...]:
    if isinstance(values, str):
        return (values,)
    given = tuple(values)
    for name in given:
        if not isinstance(name, str) or not name:
            raise TypeError(f"{argument} must be non-empty strings; got {name!r}")
    if len(set(given)) != len(given):
        raise ValueError(f"{argument} names {list(given)} more than once")
    return given


def given_labels(
    labels: Mapping[str, Sequence[str]] | None, targets: Sequence[str]
) -> dict[str, tuple[str, ...]]:
    """`labels=` checked against `targets=`: each key's class names, in index order."""
    given: dict[str, tuple[str, ...]] = {}
    for key, classes in (labels or {}).items():
        if key not in targets:
            raise ValueError(
                f"labels= names {key!r}, which is not among targets= {list(targets)}; add it to targets="
            )
        class_names = (classes,) if isinstance(classes, str) else tuple(classes)
        if not class_names or any(not isinstance(name, str) for name in class_names):
            raise TypeError(f"labels[{key!r}] must be a sequence of class names (str), not {classes!r}")
        if len(set(class_names)) != len(class_names):
            raise ValueError(f"labels[{key!r}] names a class more than once: {list(class_names)}")
        given[key] = class_names
    return given


def add_extras(
    arrays: dict[str, np.ndarray],
    ordinals: np.ndarray,
    state: ProcessState,
    *,
    annotations: Sequence[Annotations],
    labels: Mapping[str, tuple[str, ...]],
    extras: Sequence[str],
    window: Window | None,
    starts: np.ndarray | None,
    window_length: int | None,
    moved: ItemMotion | None = None,
) -> None:
    """Add to `arrays` the annotation sets, class indices of `labels` and `extras` of `ordinals`."""
    ids: list[str] | None = None
    for spec in annotations:
        rows = state.annotations.read(spec.name, ordinals, spec.fields)
        ids = rows.ids
        arrays.update(
            assemble(
                spec,
                rows,
                ordinals,
                window_axis=window.axis if window is not None else None,
                starts=starts,
                window_length=window_length,
                moved=moved,
            )
        )
    # Labels and ids come from the same metadata documents: read them once.
    documents = None
    if labels or ("id" in extras and ids is None):
        documents = state.metadata.documents(ordinals)
    if labels:
        assert documents is not None
        values = columns(documents, list(labels), ordinals)
        for key, classes in labels.items():
            arrays[key] = class_indices(key, values[key], classes, ordinals)
    if "ordinal" in extras:
        arrays["ordinal"] = ordinals.astype(np.int64, copy=True)
    if "id" in extras:
        if ids is None:
            assert documents is not None
            ids = [str(document["id"]) for document in documents]
        id_array = np.empty(len(ids), dtype=object)
        id_array[:] = ids
        arrays["id"] = id_array
    if "start" in extras:
        assert starts is not None
        arrays["start"] = np.asarray(starts, dtype=np.int64).copy()


class Labels:
    """Which targets are numbers and which are class labels, and each label's classes.

    A target is a label when `labels=` gives its classes, or when the record
    the reader probes for its layout holds a string there (record 0, when the
    reader is made, so that a reader of numeric targets reads nothing more);
    the classes not given are then learnt once from the metadata.
    """

    def __init__(self, targets: tuple[str, ...], given: Mapping[str, tuple[str, ...]]) -> None:
        #: The targets still read as numbers.
        self.targets = targets
        #: The targets read as class indices, in the order they were promoted.
        self.keys: tuple[str, ...] = ()
        self.classes: dict[str, tuple[str, ...]] = {}
        self.promote(given, given, distinct=None)

    def promote(
        self,
        keys: Iterable[str],
        given: Mapping[str, tuple[str, ...]],
        distinct: Callable[[str], tuple[str, ...]] | None,
    ) -> None:
        """Read `keys` as class labels instead of numeric targets; `distinct` learns classes not given."""
        promoted = [key for key in self.targets if key in set(keys)]
        if not promoted:
            return
        self.keys = (*self.keys, *promoted)
        self.targets = tuple(key for key in self.targets if key not in promoted)
        for key in promoted:
            if key in given:
                self.classes[key] = given[key]
            else:
                assert distinct is not None
                self.classes[key] = distinct(key)


class BatchExtras:
    """What a reader's batches carry beside fields and targets: annotation sets, labels, extras."""

    def __init__(
        self,
        annotations: tuple[Annotations, ...],
        labels: Labels,
        extras: tuple[str, ...],
        window: Window | None,
    ) -> None:
        self.annotations = annotations
        self.labels = labels
        self.extras = extras
        self.window = window

    @property
    def wanted(self) -> bool:
        """Whether a batch carries any of them (labels are known once the layout is probed)."""
        return bool(self.annotations or self.labels.keys or self.extras)

    def check(self, state: ProcessState, fields: tuple[str, ...] | None, records: int) -> None:
        """Sets and fields named by annotations= exist: checked when the reader is made, not in a worker."""
        if not self.annotations or records == 0:
            return
        taken = set(self.labels.targets) | set(self.labels.keys) | set(self.extras)
        if fields is not None:
            taken |= set(fields)
        source = state.annotations
        for spec in self.annotations:
            for key in spec.keys():
                if key in taken:
                    raise ValueError(f"annotations= returns {key!r}, which another output already names")
            rows = source.read(spec.name, np.zeros(1, dtype=np.int64), spec.fields)
            del rows
            if spec.positions and self.window is not None:
                for item, axis in spec.positions.items():
                    if axis != self.window.axis:
                        raise ValueError(
                            f"Annotations({spec.name!r}) positions[{item!r}] is along {axis!r}, and the "
                            f"window is along {self.window.axis!r}; its items would not be clipped"
                        )

    def add(
        self,
        arrays: dict[str, np.ndarray],
        ordinals: np.ndarray,
        state: ProcessState,
        starts: np.ndarray | None,
        window_length: int | None,
        moved: ItemMotion | None = None,
    ) -> None:
        """Annotation sets, string labels and provenance of `ordinals`, beside the records' arrays;
        `moved` moves annotation items under an augmentation chain (`annotations.assemble`)."""
        if not self.wanted:
            return
        add_extras(
            arrays,
            ordinals,
            state,
            annotations=self.annotations,
            labels={key: self.labels.classes[key] for key in self.labels.keys},
            extras=self.extras,
            window=self.window,
            starts=starts,
            window_length=window_length,
            moved=moved,
        )

    def one_row(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """A one-record batch without its batch axis (what ``reader[i]`` returns).

        A ragged annotation set's items stay whole, since its row has no
        fixed length; their offsets, which only locate rows, are left out.
        """
        ragged = self.ragged_keys()
        return {
            name: array if name in ragged else array[0]
            for name, array in batch.items()
            if not name.endswith(".offsets") or name not in ragged
        }

    def ragged_keys(self) -> set[str]:
        """The keys of annotation sets whose rows hold their items whole (no fixed item count)."""
        return {
            key
            for spec in self.annotations
            if spec.max_items is None
            for key in spec.keys()
            if not key.endswith(".status")
        }
