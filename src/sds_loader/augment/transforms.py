"""The transforms of an augmentation chain: plain, picklable values, checked when made.

Each transform is a frozen dataclass holding a `probability` and the ranges
its parameters are drawn from (uniformly; a single number is a range of one
value). Nothing here draws or computes: `draws` turns a row's uniforms into
the parameters the native core applies, and `keys` turns those parameters
back into the batch keys a user logs and a test recomputes a row from.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

#: The native core's number for each kind of transform (its AUGMENT_KINDS).
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

#: The resampling factors a `Resample` may draw: wider ones would make a row's
#: span (and the kernel) thousands of times the window.
FACTOR_LIMITS = (1.0 / 64.0, 64.0)

#: The longest shift a `TimeShift` may draw (the core's longest record, 2**48 samples).
MAX_SHIFT = float(2**48)

Range = tuple[float, float]


def _finite(owner: str, name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{owner} {name} must be a number or a (low, high) pair of numbers, not {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{owner} {name} must be finite, not {number!r}")
    return number


def checked_range(owner: str, name: str, value: object) -> Range:
    """`value` as a (low, high) pair of finite numbers with low <= high; one number is (v, v)."""
    if isinstance(value, tuple | list):
        if len(value) != 2:
            raise ValueError(f"{owner} {name} must be a (low, high) pair, not {value!r}")
        low, high = (_finite(owner, name, item) for item in value)
    else:
        low = high = _finite(owner, name, value)
    if low > high:
        raise ValueError(
            f"{owner} {name}=({low!r}, {high!r}) is empty; give it as (low, high) with low <= high"
        )
    return (low, high)


def checked_probability(owner: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{owner} probability must be a number from 0 to 1, not {value!r}")
    number = float(value)
    if not (0.0 <= number <= 1.0):  # NaN fails too
        raise ValueError(f"{owner} probability must be from 0 to 1, not {number!r}")
    return number


def spread(draw: np.ndarray, bounds: Range) -> np.ndarray:
    """Uniforms in [0, 1) onto [low, high]."""
    low, high = bounds
    return low + draw * (high - low)


@dataclass(frozen=True)
class Context:
    """What mapping a transform's draws needs of its rows, at its place in the chain."""

    #: Each row's sample rate at this step (Hz; NaN where none is known).
    sample_rate: np.ndarray
    #: Each row's stored SNR in dB for `Noise(stored_snr=key)` (NaN where none is asked).
    stored_snr: dict[str, np.ndarray]
    #: Whether the reader knows the sample rate (then shifts are reported in Hz too).
    rate_known: bool = False


class Transform:
    """What every transform has: a kind, a probability, its draws and its batch keys."""

    kind: ClassVar[str]
    #: Uniform draws a row takes for its parameters (the applied draw aside).
    draw_count: ClassVar[int] = 0
    probability: float

    def physical(self) -> str | None:
        """The argument given in physical units (it needs the sample rate), or None."""
        return None

    def draws(self, uniforms: np.ndarray, context: Context) -> np.ndarray:
        """The rows' parameters ``(rows, 3)`` (p1, p2, p3) from their uniforms ``(rows, draw_count)``."""
        return np.zeros((uniforms.shape[0], 3), dtype=np.float64)

    def keys(self, params: np.ndarray, context: Context) -> dict[str, np.ndarray]:
        """The batch keys of the parameters (p1, p2, p3) the core used (after it ran)."""
        return {}

    def _name(self) -> str:
        return type(self).__name__


@dataclass(frozen=True)
class Phase(Transform):
    """A rotation ``x e^{j theta}`` by an angle in radians."""

    kind: ClassVar[str] = "phase"
    draw_count: ClassVar[int] = 1
    radians: Range = (-math.pi, math.pi)
    probability: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "radians", checked_range("Phase", "radians", self.radians))
        object.__setattr__(self, "probability", checked_probability("Phase", self.probability))

    def draws(self, uniforms: np.ndarray, context: Context) -> np.ndarray:
        out = super().draws(uniforms, context)
        out[:, 0] = spread(uniforms[:, 0], self.radians)
        return out

    def keys(self, params: np.ndarray, context: Context) -> dict[str, np.ndarray]:
        return {"radians": params[:, 0].copy()}


@dataclass(frozen=True)
class FrequencyShift(Transform):
    """``x[n] e^{j 2 pi f n / fs}``: a carrier offset in Hz, or as a fraction of the sample rate.

    With `retune`, the shift is the receiver's: the capture's centre moves by
    ``-f`` and absolute frequency labels stay where they are.
    """

    kind: ClassVar[str] = "frequency_shift"
    draw_count: ClassVar[int] = 1
    hz: Range | None = None
    fraction: Range | None = None
    retune: bool = False
    probability: float = 1.0

    def __post_init__(self) -> None:
        if (self.hz is None) == (self.fraction is None):
            raise ValueError(
                "FrequencyShift takes hz=(low, high) or fraction=(low, high) of the sample rate, one of them"
            )
        if self.hz is not None:
            object.__setattr__(self, "hz", checked_range("FrequencyShift", "hz", self.hz))
        else:
            object.__setattr__(self, "fraction", checked_range("FrequencyShift", "fraction", self.fraction))
        if not isinstance(self.retune, bool):
            raise TypeError(f"FrequencyShift retune must be True or False, not {self.retune!r}")
        object.__setattr__(self, "probability", checked_probability("FrequencyShift", self.probability))

    def physical(self) -> str | None:
        return "FrequencyShift(hz=...)" if self.hz is not None else None

    def draws(self, uniforms: np.ndarray, context: Context) -> np.ndarray:
        out = super().draws(uniforms, context)
        if self.hz is not None:
            out[:, 0] = spread(uniforms[:, 0], self.hz) / context.sample_rate
        else:
            assert self.fraction is not None
            out[:, 0] = spread(uniforms[:, 0], self.fraction)
        return out

    def keys(self, params: np.ndarray, context: Context) -> dict[str, np.ndarray]:
        keys = {"fraction": params[:, 0].copy()}
        if context.rate_known:
            keys["hz"] = params[:, 0] * context.sample_rate
        return keys


@dataclass(frozen=True)
class TimeShift(Transform):
    """``x[n - s]``: a delay by whole samples (either sign), zeros entering or the record wrapping round.

    `samples` is an integer range (both ends included); `seconds` is rounded to
    the nearest sample at the row's sample rate.
    """

    kind: ClassVar[str] = "time_shift"
    draw_count: ClassVar[int] = 1
    samples: Range | None = None
    seconds: Range | None = None
    circular: bool = False
    probability: float = 1.0

    def __post_init__(self) -> None:
        if (self.samples is None) == (self.seconds is None):
            raise ValueError("TimeShift takes samples=(low, high) or seconds=(low, high), one of them")
        if self.samples is not None:
            bounds = checked_range("TimeShift", "samples", self.samples)
            if any(value != int(value) or abs(value) > MAX_SHIFT for value in bounds):
                raise ValueError(
                    f"TimeShift samples must be whole numbers of samples within +-2**48, not {self.samples!r}"
                )
            object.__setattr__(self, "samples", bounds)
        else:
            object.__setattr__(self, "seconds", checked_range("TimeShift", "seconds", self.seconds))
        if not isinstance(self.circular, bool):
            raise TypeError(f"TimeShift circular must be True or False, not {self.circular!r}")
        object.__setattr__(self, "probability", checked_probability("TimeShift", self.probability))

    def physical(self) -> str | None:
        return "TimeShift(seconds=...)" if self.seconds is not None else None

    def draws(self, uniforms: np.ndarray, context: Context) -> np.ndarray:
        out = super().draws(uniforms, context)
        if self.samples is not None:
            low, high = self.samples
            out[:, 0] = np.minimum(low + np.floor(uniforms[:, 0] * (high - low + 1.0)), high)
        else:
            assert self.seconds is not None
            out[:, 0] = np.rint(spread(uniforms[:, 0], self.seconds) * context.sample_rate)
        out[:, 1] = 1.0 if self.circular else 0.0
        return out

    def keys(self, params: np.ndarray, context: Context) -> dict[str, np.ndarray]:
        return {"samples": params[:, 0].astype(np.int64)}


@dataclass(frozen=True)
class Gain(Transform):
    """``x 10^{g/20}``: a gain in dB."""

    kind: ClassVar[str] = "gain"
    draw_count: ClassVar[int] = 1
    db: Range = (0.0, 0.0)
    probability: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "db", checked_range("Gain", "db", self.db))
        object.__setattr__(self, "probability", checked_probability("Gain", self.probability))

    def draws(self, uniforms: np.ndarray, context: Context) -> np.ndarray:
        out = super().draws(uniforms, context)
        out[:, 0] = 10.0 ** (spread(uniforms[:, 0], self.db) / 20.0)
        return out

    def keys(self, params: np.ndarray, context: Context) -> dict[str, np.ndarray]:
        return {"db": 20.0 * np.log10(params[:, 0]), "amplitude": params[:, 0].copy()}


@dataclass(frozen=True)
class Noise(Transform):
    """Complex white Gaussian noise to a target SNR in dB.

    The signal's power is measured on the samples the row holds (inside the
    record). With `stored_snr` (a metadata key holding each record's SNR in
    dB) that power is signal and noise already there, and noise is added only
    down to the target. The batch gets the noise power added (``sigma2``) and
    the SNR after (``snr_after_db``).
    """

    kind: ClassVar[str] = "noise"
    draw_count: ClassVar[int] = 1
    snr_db: Range = (0.0, 0.0)
    stored_snr: str | None = None
    probability: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "snr_db", checked_range("Noise", "snr_db", self.snr_db))
        if self.stored_snr is not None and (not isinstance(self.stored_snr, str) or not self.stored_snr):
            raise TypeError(f"Noise stored_snr must be a metadata key (str) or None, not {self.stored_snr!r}")
        object.__setattr__(self, "probability", checked_probability("Noise", self.probability))

    def draws(self, uniforms: np.ndarray, context: Context) -> np.ndarray:
        out = super().draws(uniforms, context)
        out[:, 0] = spread(uniforms[:, 0], self.snr_db)
        out[:, 1] = context.stored_snr[self.stored_snr] if self.stored_snr is not None else np.nan
        return out

    def keys(self, params: np.ndarray, context: Context) -> dict[str, np.ndarray]:
        return {
            "snr_db": params[:, 0].copy(),
            "snr_after_db": params[:, 1].copy(),
            "sigma2": params[:, 2].copy(),
        }


@dataclass(frozen=True)
class SpectralInversion(Transform):
    """``conj(x)``: the spectrum mirrored about the centre."""

    kind: ClassVar[str] = "invert"
    probability: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "probability", checked_probability("SpectralInversion", self.probability))


@dataclass(frozen=True)
class TimeReversal(Transform):
    """``x[N - 1 - n]``: the record backwards (in complex IQ its spectrum mirrors too)."""

    kind: ClassVar[str] = "reverse"
    probability: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "probability", checked_probability("TimeReversal", self.probability))


@dataclass(frozen=True)
class IQImbalance(Transform):
    """A receiver's IQ imbalance: I scaled by an amplitude in dB, Q rotated by a phase in degrees."""

    kind: ClassVar[str] = "iq_imbalance"
    draw_count: ClassVar[int] = 2
    amplitude_db: Range = (0.0, 0.0)
    phase_degrees: Range = (0.0, 0.0)
    probability: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "amplitude_db", checked_range("IQImbalance", "amplitude_db", self.amplitude_db)
        )
        object.__setattr__(
            self, "phase_degrees", checked_range("IQImbalance", "phase_degrees", self.phase_degrees)
        )
        object.__setattr__(self, "probability", checked_probability("IQImbalance", self.probability))

    def draws(self, uniforms: np.ndarray, context: Context) -> np.ndarray:
        out = super().draws(uniforms, context)
        out[:, 0] = spread(uniforms[:, 0], self.amplitude_db)
        out[:, 1] = np.radians(spread(uniforms[:, 1], self.phase_degrees))
        return out

    def keys(self, params: np.ndarray, context: Context) -> dict[str, np.ndarray]:
        return {"amplitude_db": params[:, 0].copy(), "phase_degrees": np.degrees(params[:, 1])}


@dataclass(frozen=True)
class Resample(Transform):
    """A change of sample rate by a factor r (out rate / in rate): an anti-aliased windowed-sinc
    resampler, zero-phase, the record ``ceil(N r)`` samples long after it."""

    kind: ClassVar[str] = "resample"
    draw_count: ClassVar[int] = 1
    factor: Range = (1.0, 1.0)
    probability: float = 1.0

    def __post_init__(self) -> None:
        bounds = checked_range("Resample", "factor", self.factor)
        low, high = FACTOR_LIMITS
        if bounds[0] < low or bounds[1] > high:
            raise ValueError(
                f"Resample factor={self.factor!r} must lie from {low} to {high:g} (a factor of 0 or less "
                "has no output); give the ratio of the new sample rate to the old"
            )
        object.__setattr__(self, "factor", bounds)
        object.__setattr__(self, "probability", checked_probability("Resample", self.probability))

    def draws(self, uniforms: np.ndarray, context: Context) -> np.ndarray:
        out = super().draws(uniforms, context)
        out[:, 0] = spread(uniforms[:, 0], self.factor)
        return out

    def keys(self, params: np.ndarray, context: Context) -> dict[str, np.ndarray]:
        return {"factor": params[:, 0].copy()}


#: Every transform class, by kind.
TRANSFORMS: dict[str, type[Transform]] = {
    cls.kind: cls
    for cls in (
        Phase,
        FrequencyShift,
        TimeShift,
        Gain,
        Noise,
        SpectralInversion,
        TimeReversal,
        IQImbalance,
        Resample,
    )
}
