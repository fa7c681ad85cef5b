"""A float64 numpy reference of every augmentation transform, and of the label arithmetic.

Tests recompute each augmented row from the parameters the batch returns and
compare; the reference is deliberately the plainest statement of each
definition (a direct sum where the core uses tables, a whole record where the
core computes a window's span), so that it can be checked by reading.

Conventions (those of `sds_loader.augment`): a record is a complex array whose
last axis is time, any leading axes channels; real IQ pairs ``(..., 2)`` are
viewed as complex first (`as_complex`). A chain is run on the whole record;
stage k of the chain has record length ``N_k`` (``N_0`` the stored length),
and a window is cut from the final record afterwards (`cut`). Each step is
``(kind, params)`` with ``params = [applied, p1, p2, p3]`` as the batch's
parameter keys give them (see `sds_loader.augment`); a step whose applied flag
is 0 leaves the record as it is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

#: The transform kinds by name, as the core numbers them.
KINDS = {
    "phase": 1,
    "frequency_shift": 2,
    "time_shift": 3,
    "gain": 4,
    "noise": 5,
    "invert": 6,
    "reverse": 7,
    "iq_imbalance": 8,
    "resample": 9,
}
NAMES = {number: name for name, number in KINDS.items()}

# The resampler's low-pass: a Kaiser-windowed sinc with a cutoff of
# ``RESAMPLE_PASSBAND * min(1, r) / 2`` cycles per input sample, spanning
# ``RESAMPLE_ZERO_CROSSINGS`` zero crossings of the sinc each side of its centre.
# They must equal the constants the core's resampler documents (csrc/augment).
RESAMPLE_PASSBAND = 0.9
RESAMPLE_ZERO_CROSSINGS = 16
RESAMPLE_KAISER_BETA = 8.6

Step = tuple[str, Sequence[float]]


def as_complex(data: np.ndarray) -> np.ndarray:
    """`data` as complex128: complex fields as they are, real ``(..., 2)`` IQ pairs as I + jQ."""
    array = np.asarray(data)
    if np.iscomplexobj(array):
        return array.astype(np.complex128)
    if array.shape[-1:] != (2,):
        raise ValueError(f"real IQ pairs need a trailing axis of 2, not shape {array.shape}")
    return array[..., 0].astype(np.float64) + 1j * array[..., 1].astype(np.float64)


def as_stored(data: np.ndarray, like: np.ndarray) -> np.ndarray:
    """Complex128 `data` back in the layout and dtype of `like` (complex, or real IQ pairs)."""
    if np.iscomplexobj(like):
        return data.astype(like.dtype)
    return np.stack([data.real, data.imag], axis=-1).astype(like.dtype)


# -- the transforms on a whole record (last axis time) -------------------------


def phase(x: np.ndarray, radians: float) -> np.ndarray:
    return x * np.exp(1j * radians)


def frequency_shift(x: np.ndarray, cycles_per_sample: float) -> np.ndarray:
    """``x[n] exp(j 2 pi f n)``, n the absolute index in the record (0..N-1)."""
    n = np.arange(x.shape[-1], dtype=np.float64)
    return x * np.exp(2j * np.pi * cycles_per_sample * n)


def time_shift(x: np.ndarray, samples: float, circular: bool) -> np.ndarray:
    """``x[n - s]``: zeros entering (or the record wrapping round, `circular`)."""
    s = int(samples)
    count = x.shape[-1]
    if circular:
        return np.roll(x, s % count if count else 0, axis=-1)
    out = np.zeros_like(x)
    if abs(s) >= count:
        return out
    if s >= 0:
        out[..., s:] = x[..., : count - s]
    else:
        out[..., : count + s] = x[..., -s:]
    return out


def gain(x: np.ndarray, amplitude: float) -> np.ndarray:
    return x * amplitude


def invert(x: np.ndarray) -> np.ndarray:
    return np.conj(x)


def reverse(x: np.ndarray) -> np.ndarray:
    return x[..., ::-1].copy()


def iq_imbalance(x: np.ndarray, amplitude_db: float, phase_radians: float) -> np.ndarray:
    """``I' = a I``, ``Q' = Q cos(phi) - I sin(phi)``, with ``a = 10^(dB/20)``."""
    a = 10.0 ** (amplitude_db / 20.0)
    i, q = x.real, x.imag
    return a * i + 1j * (q * math.cos(phase_radians) - i * math.sin(phase_radians))


def noise_sigma2(power: float, target_db: float, stored_db: float = math.nan) -> tuple[float, float]:
    """The noise power to add and the SNR after (dB), for a row of measured `power`.

    Without a stored SNR the measured power is all signal. With one (s0), the
    signal holds ``P s0 / (1 + s0)`` and the noise already there ``P / (1 + s0)``;
    the noise added brings the SNR down to the target, never up (none is added
    when the target is above the stored SNR, and the SNR after is the stored one).
    """
    target = 10.0 ** (target_db / 10.0)
    if math.isnan(stored_db):
        signal, existing = power, 0.0
    else:
        stored = 10.0 ** (stored_db / 10.0)
        signal, existing = power * stored / (1.0 + stored), power / (1.0 + stored)
    sigma2 = max(0.0, signal / target - existing)
    total = existing + sigma2
    after = 10.0 * math.log10(signal / total) if total > 0 and signal > 0 else target_db
    return sigma2, after


def add_noise(x: np.ndarray, sigma2: float, unit_noise: np.ndarray) -> np.ndarray:
    """``x + sqrt(sigma2) u``, `unit_noise` u of x's shape with E|u|^2 = 1 (CN(0, 1))."""
    if unit_noise.shape != x.shape:
        raise ValueError(f"noise of shape {unit_noise.shape} for a record of shape {x.shape}")
    return x + math.sqrt(sigma2) * unit_noise


def resample_kernel(t: np.ndarray, cutoff: float) -> np.ndarray:
    """The low-pass at offsets `t` (input samples): ``2 fc sinc(2 fc t)`` under a Kaiser window.

    The window spans ``RESAMPLE_ZERO_CROSSINGS / (2 fc)`` input samples each
    side, so downsampling widens the kernel with the cutoff. Its taps sum to
    about 1 at every fractional offset: a constant keeps its level whatever r.
    """
    half_width = RESAMPLE_ZERO_CROSSINGS / (2.0 * cutoff)
    ratio = t / half_width
    inside = np.abs(ratio) <= 1.0
    window = np.where(
        inside,
        np.i0(RESAMPLE_KAISER_BETA * np.sqrt(np.clip(1.0 - ratio * ratio, 0.0, None)))
        / np.i0(RESAMPLE_KAISER_BETA),
        0.0,
    )
    return 2.0 * cutoff * np.sinc(2.0 * cutoff * t) * window


def resampled_length(length: int, factor: float) -> int:
    """``ceil(N r)``: the record's length after resampling by r."""
    return int(math.ceil(length * factor))


def resample(x: np.ndarray, factor: float) -> np.ndarray:
    """``y[m] = sum_i x[i] h(m / r - i)`` over ``0 <= i < N``: zero-phase, length ``ceil(N r)``.

    A direct sum over every input sample the kernel reaches (slow, exact).
    """
    count = x.shape[-1]
    out_count = resampled_length(count, factor)
    cutoff = RESAMPLE_PASSBAND * min(1.0, factor) / 2.0
    half_width = RESAMPLE_ZERO_CROSSINGS / (2.0 * cutoff)
    out = np.zeros((*x.shape[:-1], out_count), dtype=np.complex128)
    for m in range(out_count):
        centre = m / factor
        low = max(0, int(math.floor(centre - half_width)))
        high = min(count, int(math.ceil(centre + half_width)) + 1)
        if high <= low:
            continue
        taps = resample_kernel(centre - np.arange(low, high, dtype=np.float64), cutoff)
        out[..., m] = x[..., low:high] @ taps
    return out


def apply(
    record: np.ndarray,
    steps: Sequence[Step],
    *,
    unit_noise: Mapping[int, np.ndarray] | None = None,
) -> np.ndarray:
    """The chain `steps` on a whole complex record (last axis time), in float64.

    `unit_noise[k]` is the CN(0, 1) noise of step k, of the record's shape at
    that step; the step's ``p3`` (sigma2) scales it.
    """
    x = np.asarray(record, dtype=np.complex128)
    for position, (kind, params) in enumerate(steps):
        applied, p1, p2, p3 = (float(value) for value in params)
        if not applied:
            continue
        if kind == "phase":
            x = phase(x, p1)
        elif kind == "frequency_shift":
            x = frequency_shift(x, p1)
        elif kind == "time_shift":
            x = time_shift(x, p1, bool(p2))
        elif kind == "gain":
            x = gain(x, p1)
        elif kind == "noise":
            if unit_noise is None or position not in unit_noise:
                raise ValueError(f"step {position} adds noise: pass its unit noise")
            x = add_noise(x, p3, unit_noise[position])
        elif kind == "invert":
            x = invert(x)
        elif kind == "reverse":
            x = reverse(x)
        elif kind == "iq_imbalance":
            x = iq_imbalance(x, p1, p2)
        elif kind == "resample":
            x = resample(x, p1)
        else:
            raise ValueError(f"no transform {kind!r}")
    return x


def cut(x: np.ndarray, start: int, length: int) -> np.ndarray:
    """The window ``[start, start + length)`` of a record; positions outside it are zero."""
    count = x.shape[-1]
    out = np.zeros((*x.shape[:-1], length), dtype=x.dtype)
    low, high = max(start, 0), min(start + length, count)
    if high > low:
        out[..., low - start : high - start] = x[..., low:high]
    return out


def rms_error(got: np.ndarray, want: np.ndarray, reference: np.ndarray) -> float:
    """The RMS of ``got - want`` relative to the RMS of `reference` (the record compared against)."""
    scale = math.sqrt(float(np.mean(np.abs(reference) ** 2))) or 1.0
    return math.sqrt(float(np.mean(np.abs(np.asarray(got) - np.asarray(want)) ** 2))) / scale


# -- labels ------------------------------------------------------------------


@dataclass
class Labels:
    """A row's label items after a chain and a window.

    `source[i]` is the stored item kept item i comes from (an item a circular
    shift wraps round the record's end comes back as two pieces, both naming
    it); `time` are ``[start, stop)`` in samples of the returned row, `frequency`
    ``[low, high]`` in Hz (relative to the centre, or absolute if asked), both
    float64 before any conversion to the stored dtype. `sample_rate` and
    `center_frequency` are the record's after the chain.
    """

    source: np.ndarray
    time: np.ndarray | None
    frequency: np.ndarray | None
    sample_rate: float
    center_frequency: float


def labels(
    steps: Sequence[Step],
    *,
    record_length: int,
    sample_rate: float,
    time: np.ndarray | None = None,
    frequency: np.ndarray | None = None,
    absolute: bool = False,
    center_frequency: float = 0.0,
    window: tuple[int, int] | None = None,
    keep_fraction: float = 0.5,
    retune: Sequence[bool] | None = None,
) -> Labels:
    """What a chain does to one record's label items, step by step in the chain's order.

    Time items ``[n0, n1)``: clipped to the record, then moved by a time shift
    (zero fill: clipped to the record again; circular: wrapped, an item
    crossing the end becoming two pieces), reversed ``[N - n1, N - n0)``,
    scaled by a resample ``[n0 r, n1 r)`` and clipped to the ``ceil(N r)``
    samples left; finally the window ``[a, a + L)`` (the row itself without
    one) cuts them and they are shifted by ``-a``.

    Frequency items ``[fl, fh]`` (Hz, relative to the centre internally):
    moved by a frequency shift of f Hz (``p1 * fs`` at that step; a retune
    moves the centre by ``-f`` instead, so absolute edges stay), mirrored to
    ``[-fh, -fl]`` by a spectral inversion and by a time reversal, unchanged
    in Hz by a resample. After every step they are clipped to the band the
    data holds: ``+-fs/2`` at the step's sample rate, and a resample's
    passband ``+-RESAMPLE_PASSBAND * min(fs, fs r) / 2``.

    One rule keeps or drops: an item (each piece of a wrapped one) is kept
    when every clip left it overlapping (``stop > low and start < high``) and
    its kept extent is at least `keep_fraction` of its extent unclipped (time:
    the stored extent times every resample factor; frequency: the stored
    extent in Hz), in each of the dimensions it has.
    """
    retunes = list(retune) if retune is not None else [False] * len(steps)
    count = (time if time is not None else frequency).shape[0]  # type: ignore[union-attr]
    source = np.arange(count, dtype=np.int64)
    alive = np.ones(count, dtype=bool)
    t = np.asarray(time, dtype=np.float64).reshape(-1, 2).copy() if time is not None else None
    f = np.asarray(frequency, dtype=np.float64).reshape(-1, 2).copy() if frequency is not None else None
    fc = float(center_frequency)
    if f is not None and absolute:
        f -= fc
    t_full = (t[:, 1] - t[:, 0]).copy() if t is not None else None
    f_full = (f[:, 1] - f[:, 0]).copy() if f is not None else None
    fs = float(sample_rate)
    length = int(record_length)

    def clip(values: np.ndarray, low: float, high: float) -> None:
        nonlocal alive
        alive &= (values[:, 1] > low) & (values[:, 0] < high)
        np.clip(values, low, high, out=values)

    if t is not None:
        clip(t, 0.0, float(length))
    if f is not None:
        clip(f, -fs / 2, fs / 2)
    for position, (kind, params) in enumerate(steps):
        applied, p1, p2, _ = (float(value) for value in params)
        if not applied:
            continue
        if kind == "frequency_shift":
            hz = p1 * fs
            if f is not None:
                f += hz
            if retunes[position]:
                fc -= hz
        elif kind in ("invert", "reverse") and f is not None:
            f[:] = -f[:, ::-1]
        if kind == "time_shift" and t is not None:
            t += int(p1)
            if p2:
                wrap = np.floor(t[:, 0] / length) * length
                t -= wrap[:, None]
                over = t[:, 1] > length
                if over.any():
                    extra = np.column_stack([np.zeros(int(over.sum())), t[over, 1] - length])
                    t[over, 1] = length
                    t = np.concatenate([t, extra])
                    source = np.concatenate([source, source[over]])
                    alive = np.concatenate([alive, alive[over]])
                    t_full = np.concatenate([t_full, t_full[over]])  # type: ignore[list-item]
                    if f is not None:
                        f = np.concatenate([f, f[over]])
                        f_full = np.concatenate([f_full, f_full[over]])  # type: ignore[list-item]
            clip(t, 0.0, float(length))
        elif kind == "reverse" and t is not None:
            t[:] = length - t[:, ::-1]
        elif kind == "resample":
            new_length = resampled_length(length, p1)
            if t is not None:
                t *= p1
                t_full = t_full * p1  # type: ignore[operator]
                clip(t, 0.0, float(new_length))
            if f is not None:
                edge = RESAMPLE_PASSBAND * min(fs, fs * p1) / 2
                clip(f, -edge, edge)
            fs *= p1
            length = new_length
        if f is not None:
            clip(f, -fs / 2, fs / 2)
    if t is not None:
        start, span = window if window is not None else (0, int(record_length))
        clip(t, float(start), float(start + span))
        t -= start
        alive &= (t[:, 1] - t[:, 0]) >= keep_fraction * t_full  # type: ignore[operator]
    if f is not None:
        alive &= (f[:, 1] - f[:, 0]) >= keep_fraction * f_full  # type: ignore[operator]
        if absolute:
            f += fc
    # Pieces in the order of the items they come from, each item's pieces in order of time.
    order = np.lexsort(((t[:, 0] if t is not None else np.zeros(source.size)), source))
    order = order[alive[order]]
    return Labels(
        source=source[order],
        time=t[order] if t is not None else None,
        frequency=f[order] if f is not None else None,
        sample_rate=fs,
        center_frequency=fc,
    )


def stored_positions(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Float64 label positions in a field's dtype: integers take the samples an item touches
    (start rounded down, stop up); floats are kept."""
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.integer):
        return np.column_stack([np.floor(values[:, 0]), np.ceil(values[:, 1])]).astype(dtype)
    return values.astype(dtype)


# -- rows of a batch -----------------------------------------------------------


def steps_of(chain: object, batch: Mapping[str, np.ndarray], row: int) -> list[Step]:
    """Row `row`'s steps of `chain` (a `sds_loader.augment.Chain`) from the batch's parameter keys alone,
    plus what the chain fixes (a time shift's mode)."""
    steps: list[Step] = []
    for position, transform in enumerate(chain.transforms):  # type: ignore[attr-defined]
        kind = transform.kind
        stem = f"augment.{position}.{kind}."

        def value(name: str, stem: str = stem) -> float:
            return float(batch[stem + name][row])

        applied = float(bool(batch[stem + "applied"][row]))
        params = [applied, 0.0, 0.0, 0.0]
        if kind == "phase":
            params[1] = value("radians")
        elif kind == "frequency_shift":
            params[1] = value("fraction")
        elif kind == "time_shift":
            params[1] = value("samples")
            params[2] = 1.0 if transform.circular else 0.0
        elif kind == "gain":
            params[1] = value("amplitude")
        elif kind == "noise":
            params[1:] = [value("snr_db"), value("snr_after_db"), value("sigma2")]
        elif kind == "iq_imbalance":
            params[1:3] = [value("amplitude_db"), math.radians(value("phase_degrees"))]
        elif kind == "resample":
            params[1] = value("factor")
        steps.append((kind, params))
    return steps
