"""What a batch carries beside its fields and targets, and the checks of the arguments that ask for it.

Annotation sets (`annotations=`), class indices of string metadata
(`labels=`) and provenance (`extras=`: each row's ordinal, record id and
window start) all come from the metadata and annotation shards, read for
the whole batch once its records are read. Their arguments are checked when
the reader is made, so that a typo fails there rather than in a worker.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from sds_loader.annotations import Annotations, assemble
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
