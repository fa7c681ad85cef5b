"""Running the native augmentation core on whole records, for the tests of csrc/augment.

`run` does what a reader does with the core: asks `augment_spans` which span of
each record a window needs, reads that span (zero outside the record, and
garbage where the core must not look: outside the record it must read zero
whatever the buffer holds), and calls `augment_apply`. Records are complex
arrays ``(C, N)``, the layout the reference (augment_reference) takes.
"""

from __future__ import annotations

from collections.abc import Sequence

import augment_reference as ref
import numpy as np
from native_required import _native

#: (kind name, [applied, p1, p2, p3]) as the reference takes a step.
Step = tuple[str, Sequence[float]]


def kinds_of(steps: Sequence[Step]) -> np.ndarray:
    return np.array([_native.AUGMENT_KINDS[name] for name, _ in steps], dtype=np.int32)


def params_of(rows_steps: Sequence[Sequence[Step]]) -> np.ndarray:
    return np.array(
        [[list(map(float, params)) for _, params in steps] for steps in rows_steps], dtype=np.float64
    ).reshape(len(rows_steps), len(rows_steps[0]), 4)


def stored(record: np.ndarray, dtype: str) -> np.ndarray:
    """A complex (C, N) record in a stored dtype: complex64, complex128 or float32 IQ pairs."""
    if dtype == "pairs":
        return np.stack([record.real, record.imag], axis=-1).astype(np.float32)
    return record.astype(dtype)


def run(
    records: Sequence[np.ndarray],
    rows_steps: Sequence[Sequence[Step]],
    *,
    dtype: str = "complex64",
    window: tuple[Sequence[int], int] | None = None,
    seed: int = 7,
    epoch: int = 0,
    ordinals: Sequence[int] | None = None,
    threads: int = 1,
    garbage: float = 1e6,
) -> tuple[np.ndarray, np.ndarray]:
    """Each record (C, N) through its row's steps; (rows out as complex128 (rows, C, L), params after).

    Without a window a row is its whole record (a resample keeps the row's
    length N_0, as the reader does). Records of one batch share C; N may differ
    only with a window.
    """
    rows = len(records)
    channels = records[0].shape[0]
    lengths = np.array([r.shape[-1] for r in records], dtype=np.int64)
    if window is None:
        starts, out_length = np.zeros(rows, dtype=np.int64), int(lengths[0])
    else:
        starts, out_length = np.asarray(window[0], dtype=np.int64), int(window[1])
    kinds = kinds_of(rows_steps[0])
    params = params_of(rows_steps)
    src_start, src_length, _ = _native.augment_spans(kinds, params, starts, out_length, lengths)
    width = max(1, int(src_length.max()))
    shape = (rows, channels, width) + ((2,) if dtype == "pairs" else ())
    base = np.float32 if dtype == "pairs" else np.dtype(dtype)
    source = np.full(shape, garbage, dtype=base)
    for row, record in enumerate(records):
        values = stored(record, dtype)
        low, high = max(0, int(src_start[row])), min(int(lengths[row]), int(src_start[row] + src_length[row]))
        if high > low:
            at = low - int(src_start[row])
            source[row, :, at : at + high - low] = values[:, low:high]
    out = np.full((rows, channels, out_length) + ((2,) if dtype == "pairs" else ()), garbage, dtype=base)
    _native.augment_apply(
        kinds,
        params,
        seed,
        epoch,
        np.asarray(ordinals if ordinals is not None else range(rows), dtype=np.int64),
        source,
        src_start,
        lengths,
        out,
        starts,
        threads,
    )
    return ref.as_complex(out), params


def expected(
    record: np.ndarray, steps: Sequence[Step], window: tuple[int, int] | None = None, **noise
) -> np.ndarray:
    """The reference: the chain on the whole record, then the window (the record's own length without one)."""
    full = ref.apply(record, steps, **noise)
    start, length = window if window is not None else (0, record.shape[-1])
    return ref.cut(full, start, length)


def signal(channels: int, length: int, seed: int = 0) -> np.ndarray:
    """A complex record (C, N): a few tones and some band-limited noise, RMS about 1."""
    rng = np.random.default_rng(seed)
    n = np.arange(length)
    out = np.zeros((channels, length), dtype=np.complex128)
    for c in range(channels):
        for _ in range(3):
            out[c] += rng.uniform(0.2, 0.6) * np.exp(
                2j * np.pi * (rng.uniform(-0.4, 0.4) * n + rng.uniform())
            )
        white = rng.normal(size=length) + 1j * rng.normal(size=length)
        out[c] += 0.3 * np.convolve(white, np.ones(8) / 8, mode="same")
    return out
