"""Per-record numbers a chain needs: sample rate, centre frequency, stored SNR, length.

They come from each record's metadata document (an axis's Coordinate, or a
metadata key), which costs a JSON decode per record: each ordinal's value is
read once in this process and kept (8 bytes a record), so an epoch after the
first reads no metadata for them at all.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from sds_loader.augment.chain import TIME_UNITS, SampleRate

if TYPE_CHECKING:
    from sds_loader.process_state import ProcessState


class MissingNumber(ValueError):
    """A record lacks a number a chain needs (raised with what is missing and how to give it)."""


def axis_rate(document: Mapping[str, Any], fields: tuple[str, ...], axis: str, ordinal: int) -> float:
    """The sample rate (Hz) a record's `axis` Coordinate gives: 1 / step, the step in its unit."""
    described = document.get("fields", {})
    for name in fields:
        for item in described.get(name, {}).get("axes", ()):
            if item.get("name") != axis:
                continue
            coordinate = item.get("coordinate") or {}
            step, unit = coordinate.get("step"), coordinate.get("unit")
            if step is None or unit is None:
                raise MissingNumber(
                    f"record {ordinal}: axis {axis!r} of field {name!r} has no Coordinate step and unit "
                    f"(it has {coordinate or 'no coordinate'}), so it gives no sample rate"
                )
            if unit not in TIME_UNITS:
                raise MissingNumber(
                    f"record {ordinal}: axis {axis!r} of field {name!r} steps in {unit!r}, not a unit of "
                    f"time ({', '.join(TIME_UNITS)})"
                )
            if (
                isinstance(step, bool)
                or not isinstance(step, numbers.Real)
                or not (float(step) > 0 and math.isfinite(step))
            ):
                raise MissingNumber(
                    f"record {ordinal}: axis {axis!r} of field {name!r} has a Coordinate step of {step!r}"
                )
            return 1.0 / (float(step) * TIME_UNITS[unit])
    raise MissingNumber(f"record {ordinal}: no field among {list(fields)} has an axis {axis!r}")


def key_number(document: Mapping[str, Any], key: str, ordinal: int) -> float:
    metadata = document.get("metadata", {})
    if key not in metadata:
        raise MissingNumber(
            f"record {ordinal} has no metadata key {key!r} (its metadata has {sorted(metadata)})"
        )
    value = metadata[key]
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise MissingNumber(f"record {ordinal}: metadata {key!r} is {value!r}, not a finite number")
    return float(value)


class RecordNumbers:
    """Numbers per ordinal for this process, each read once from the metadata and kept."""

    def __init__(self) -> None:
        self._kept: dict[tuple[object, ...], np.ndarray] = {}

    def __getstate__(self) -> dict[str, object]:
        return {"_kept": {}}  # another process reads its own

    def values(
        self, state: ProcessState, ordinals: np.ndarray, source: SampleRate, fields: tuple[str, ...]
    ) -> np.ndarray:
        """Each ordinal's number from `source` (float64), reading only those not yet kept."""
        if source.source == "fixed":
            return np.full(ordinals.size, source.value, dtype=np.float64)
        slot = (source.source, source.name, fields)

        name = source.name
        assert name is not None

        def fetch(wanted: np.ndarray) -> list[float]:
            documents = state.metadata.documents(wanted)
            pairs = zip(documents, wanted.tolist(), strict=True)
            if source.source == "axis":
                return [axis_rate(document, fields, name, ordinal) for document, ordinal in pairs]
            return [key_number(document, name, ordinal) for document, ordinal in pairs]

        return self._cached(state, slot, ordinals, fetch)

    def lengths(
        self, state: ProcessState, ordinals: np.ndarray, axis: str, fields: tuple[str, ...] | None
    ) -> np.ndarray:
        """Each ordinal's length along `axis` (the longest of `fields` carrying it, all when None),
        kept once read."""
        values = self._cached(
            state,
            ("length", axis, fields),
            ordinals,
            lambda wanted: state.metadata.lengths(wanted, axis, fields),
        )
        return values.astype(np.int64)

    def _cached(
        self,
        state: ProcessState,
        slot: tuple[object, ...],
        ordinals: np.ndarray,
        fetch: Callable[[np.ndarray], Sequence[float] | np.ndarray],
    ) -> np.ndarray:
        """`ordinals`' values kept under `slot`, those not yet kept fetched (once each) by `fetch`."""
        kept = self._kept.get(slot)
        if kept is None:
            kept = self._kept[slot] = np.full(len(state.dataset), np.nan)
        values = kept[ordinals]
        unknown = np.isnan(values)
        if unknown.any():
            wanted = np.unique(ordinals[unknown])
            kept[wanted] = fetch(wanted)
            values = kept[ordinals]
        return np.asarray(values, dtype=np.float64)
