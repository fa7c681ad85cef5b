"""Windows: a fixed-length slice of every record along one named axis.

Radio captures vary in length and often run to millions of samples, while a
model trains on fixed windows. A `Window` names an axis (a signal_dataset
axis name such as ``"time"``) and a length; every selected field that carries
the axis keeps only the window's positions of it, wherever the axis sits in
the field's shape, and fields without it are read whole. Records of different
lengths along the axis then batch together: the window fixes the shape.

The reader reads only what a window needs where the storage lets it: on
uncompressed shards, just the window's bytes (once a chunk has been verified,
or with verification off); on zstd shards, decompression stops at the
window's end. See `BatchReader` for the trade-offs.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from sds_loader.boundaries import Boundaries, boundaries_setting

#: Where a window starts when `read` is given no starts.
CROPS = ("start", "center", "random")


@dataclass(frozen=True, slots=True)
class Window:
    """`length` positions of `axis`, from a start chosen per record.

    `pad=True` lets a window run past the end of a shorter record: the rest of
    its row is zero and the batch carries ``<field>_length``, the valid
    positions of each row. Without it such a window raises `IndexError`.
    `length=None` (with ``pad=True``) pads every row to the longest record of
    its batch instead of cutting a fixed length.

    `crop` chooses starts when none are passed: ``"start"`` (0), ``"center"``,
    or ``"random"``: uniform over the positions where the window fits (0 when
    the record is shorter), a function of (seed, epoch, ordinal) alone, so
    that the same seed and epoch reproduce it in any process.

    `boundaries` (a `sds_loader.Boundaries`, or a sequence of lengths; with
    ``length=None`` and ``pad=True``) pads each batch to the smallest boundary
    that holds its longest record instead, so that an epoch's batches take
    at most one length per boundary; a record past the largest boundary is
    cut to it where `crop` says, or refused (`Boundaries.overflow`).
    """

    axis: str
    length: int | None
    pad: bool = False
    crop: str = "start"
    boundaries: Boundaries | None = None

    def __init__(
        self,
        axis: str,
        length: int | None,
        *,
        pad: bool = False,
        crop: str = "start",
        boundaries: Boundaries | Iterable[int] | None = None,
    ) -> None:
        if not isinstance(axis, str) or not axis:
            raise TypeError(f"Window axis must be a non-empty axis name, not {axis!r}")
        if length is not None:
            if isinstance(length, bool) or not isinstance(length, numbers.Integral):
                raise TypeError(f"Window length must be a positive integer or None, not {length!r}")
            if length < 1:
                raise ValueError(f"Window length must be at least 1, not {length}")
            length = int(length)
        elif not pad:
            raise ValueError(
                "Window(axis, None) pads every row to the longest record of its batch; "
                "pass pad=True with it, or a length"
            )
        if crop not in CROPS:
            raise ValueError(f"Window crop must be one of {CROPS}, not {crop!r}")
        bounded = boundaries_setting(boundaries, "Window")
        if bounded is not None and length is not None:
            raise ValueError(
                f"Window(axis, {length}, boundaries=...) has both a fixed length and boundaries; "
                "pass length=None (with pad=True) to pad each batch to its smallest boundary"
            )
        object.__setattr__(self, "axis", axis)
        object.__setattr__(self, "length", length)
        object.__setattr__(self, "pad", bool(pad))
        object.__setattr__(self, "crop", crop)
        object.__setattr__(self, "boundaries", bounded)

    @property
    def crop_length(self) -> int | None:
        """The length a crop places starts for: the window's, or the largest boundary when cut to it."""
        if self.length is not None:
            return self.length
        if self.boundaries is not None and self.boundaries.overflow == "cut":
            return self.boundaries.largest
        return None

    def batch_length(self, rows: np.ndarray, ordinals: np.ndarray) -> int:
        """The length of a batch whose rows hold `rows` positions from their starts to their ends."""
        if self.length is not None:
            return self.length
        if self.boundaries is not None:
            return self.boundaries.batch_length(rows, ordinals, self.axis)
        return int(np.max(rows)) if np.asarray(rows).size else 0


def length_key(field: str) -> str:
    """The name of the array of valid positions that comes with a padded field."""
    return f"{field}_length"


def normalize_starts(starts: Iterable[int] | np.ndarray, count: int) -> np.ndarray:
    """One int64 start per index; range is checked against each record later."""
    if isinstance(starts, str | bytes) or not isinstance(starts, Iterable | np.ndarray):
        raise TypeError(f"starts must be a sequence of integers, not {type(starts).__name__}")
    if isinstance(starts, np.ndarray):
        array = starts
        if array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer):
            raise TypeError(f"starts must be integers; got an array of {array.dtype}")
        if array.ndim != 1:
            raise ValueError(f"starts must be one-dimensional; got shape {array.shape}")
        if array.dtype == np.uint64 and array.size and array.max() > np.iinfo(np.int64).max:
            raise IndexError(f"start {int(array.max())} is past the end of every record")
        array = array.astype(np.int64)
    else:
        values = list(starts)
        for value in values:
            if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
                raise TypeError(f"starts must be integers; got {type(value).__name__} {value!r}")
            if not -(2**63) <= int(value) < 2**63:
                raise IndexError(f"start {int(value)} is past the end of every record")
        array = np.asarray(values, dtype=np.int64) if values else np.zeros(0, dtype=np.int64)
    if array.size != count:
        raise ValueError(f"starts has {array.size} entries for {count} indices; pass one start per index")
    return np.ascontiguousarray(array)


def window_crop(
    window: Window,
    ordinals: np.ndarray,
    lengths_of: Callable[[np.ndarray], np.ndarray],
    *,
    seed: int,
    epoch: int,
) -> np.ndarray:
    """The starts `window`'s crop picks for `ordinals`; `lengths_of` gives their lengths along
    its axis, asked only when the crop needs them."""
    if window.crop == "start" or window.crop_length is None:
        return np.zeros(ordinals.size, dtype=np.int64)
    lengths = lengths_of(ordinals)
    return crop_starts(window.crop, window.crop_length, lengths, ordinals, seed=seed, epoch=epoch)


def batch_window_length(
    window: Window | None,
    ordinals: np.ndarray,
    starts: np.ndarray | None,
    lengths_of: Callable[[np.ndarray], np.ndarray],
) -> int | None:
    """The window's length for a batch: fixed, or the longest row (length=None), rounded up
    to its boundary when the window has boundaries; None without a window."""
    if window is None:
        return None
    if window.length is not None:
        return window.length
    if ordinals.size == 0:
        return 0
    assert starts is not None
    lengths = lengths_of(ordinals)
    outside = (starts < 0) | (starts >= lengths)
    if outside.any():
        k = int(np.argmax(outside))
        raise IndexError(
            f"record {int(ordinals[k])}: window start {int(starts[k])} is outside its "
            f"{int(lengths[k])} positions along axis {window.axis!r}; pass a start from 0 "
            f"to {max(int(lengths[k]) - 1, 0)}"
        )
    return window.batch_length(lengths - starts, ordinals)


def batch_placement(
    window: Window | None,
    ordinals: np.ndarray,
    starts: Iterable[int] | np.ndarray | None,
    lengths_of: Callable[[np.ndarray], np.ndarray],
    *,
    epoch: int = 0,
) -> tuple[np.ndarray | None, int | None]:
    """Where a batch's window sits: each row's start and the batch's window length.

    `starts` as `BatchReader.read` takes them (None: the crop's, with seed 0
    and `epoch`). Without a window both are None, and `starts` is refused,
    since it could only be a mistake.
    """
    if window is None:
        if starts is not None:
            raise ValueError(
                "starts= places a window, and this reader has none; make it with "
                "window=sds_loader.Window(axis, length)"
            )
        return None, None
    row_starts = (
        normalize_starts(starts, ordinals.size)
        if starts is not None
        else window_crop(window, ordinals, lengths_of, seed=0, epoch=epoch)
    )
    return row_starts, batch_window_length(window, ordinals, row_starts, lengths_of)


def crop_starts(
    crop: str,
    window_length: int | None,
    lengths: np.ndarray,
    ordinals: np.ndarray,
    *,
    seed: int,
    epoch: int,
) -> np.ndarray:
    """Starts for records of `lengths` along the window's axis."""
    lengths = np.asarray(lengths, dtype=np.int64)
    if crop == "start" or window_length is None:
        return np.zeros(lengths.size, dtype=np.int64)
    room: np.ndarray = np.maximum(lengths - window_length, 0)
    if crop == "center":
        return room // 2
    draws = _uniform_draws(seed, epoch, np.asarray(ordinals, dtype=np.int64))
    # 53 random bits as a fraction in [0, 1), scaled onto [0, room]: uniform to
    # within 2**-53, for any record length a float64 holds exactly.
    fraction = (draws >> np.uint64(11)).astype(np.float64) * 2.0**-53
    starts: np.ndarray = np.minimum(np.floor(fraction * (room + 1)).astype(np.int64), room)
    return starts


def _uniform_draws(seed: int, epoch: int, ordinals: np.ndarray) -> np.ndarray:
    """64 well-mixed bits per ordinal from (seed, epoch, ordinal): SplitMix64's finaliser
    over a combination of the three, so no generator state crosses processes."""
    with np.errstate(over="ignore"):
        key = np.uint64(_mix(_mix(np.uint64(seed & (2**64 - 1))) ^ np.uint64(epoch & (2**64 - 1))))
        return _mix(ordinals.astype(np.uint64) ^ key)


_Bits = TypeVar("_Bits", np.uint64, np.ndarray)


def _mix(value: _Bits) -> _Bits:
    with np.errstate(over="ignore"):
        value = value + np.uint64(0x9E3779B97F4A7C15)
        value = (value ^ (value >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        value = (value ^ (value >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        mixed: _Bits = value ^ (value >> np.uint64(31))
        return mixed


def cut(
    data: np.ndarray, axis: int, start: int, length: int, pad: bool, *, ordinal: int, field: str
) -> tuple[np.ndarray, int]:
    """`data`'s window along `axis` (zero-padded to `length`), and how many positions are valid."""
    total = data.shape[axis]
    if start < 0 or start >= total:
        raise IndexError(
            f"record {ordinal}: window start {start} is outside field {field!r}, which holds "
            f"{total} positions along the window's axis; pass a start from 0 to {max(total - 1, 0)}"
        )
    valid = min(length, total - start)
    if valid < length and not pad:
        raise IndexError(
            f"record {ordinal}: window of {length} positions at start {start} runs past the end "
            f"of field {field!r}, which holds {total} positions along the window's axis; pass a "
            f"start of at most {max(total - length, 0)}, or Window(..., pad=True) to zero-fill"
        )
    taken = np.take(data, np.arange(start, start + valid), axis=axis)
    if valid == length:
        return taken, valid
    shape = list(data.shape)
    shape[axis] = length
    out = np.zeros(shape, dtype=data.dtype)
    index = [slice(None)] * data.ndim
    index[axis] = slice(0, valid)
    out[tuple(index)] = taken
    return out, valid
