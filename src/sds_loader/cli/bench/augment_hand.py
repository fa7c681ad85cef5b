"""The augmentation a user writes by hand after the read: the baselines of ``bench --augment``.

The chain is the one the issue names and training jobs run: a random phase,
a carrier frequency offset, a time shift with zeros entering, and white
Gaussian noise to a random SNR measured from the row's own power. It is
written twice, as a user would:

- record by record in numpy, each transform a function of one record, as a
  ``__getitem__`` or a per-sample transform list applies it: complex64 in and
  out, the index ramp made once per length, one generator for the whole run
  (the cheapest way to draw; one seeded per record, for reproducibility,
  costs more);
- over the whole batch in torch ops on the CPU, each transform one
  broadcast over rows: the best a user does by hand without writing native
  code.

Both take their parameters as arrays (`Draws`) so that a test can give them
the parameters the reader's chain drew and check they do the same
arithmetic; the runners draw their own. `resample_records` is the third
baseline: `scipy.signal.resample_poly` record by record.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

#: The chain's parameter ranges, the same for the reader's chain and the baselines.
PHASE_RADIANS = (-math.pi, math.pi)
#: Frequency offsets as a fraction of the sample rate (cycles per sample).
SHIFT_FRACTION = (-0.1, 0.1)
SHIFT_SAMPLES = (-64, 64)
SNR_DB = (0.0, 20.0)


@dataclass(frozen=True)
class Draws:
    """One batch's parameters, one value a row: the chain's four transforms in order."""

    radians: np.ndarray
    #: Cycles per sample (Hz over the sample rate).
    cycles: np.ndarray
    #: Whole samples; positive moves the record later, zeros entering at its start.
    shift: np.ndarray
    #: The noise's power, relative to the row's power after the shift (0: no noise).
    noise_fraction: np.ndarray

    @classmethod
    def draw(cls, rng: np.random.Generator, rows: int) -> Draws:
        snr_db = rng.uniform(*SNR_DB, size=rows)
        return cls(
            radians=rng.uniform(*PHASE_RADIANS, size=rows),
            cycles=rng.uniform(*SHIFT_FRACTION, size=rows),
            shift=rng.integers(SHIFT_SAMPLES[0], SHIFT_SAMPLES[1] + 1, size=rows),
            noise_fraction=10.0 ** (-snr_db / 10.0),
        )


# -- numpy, record by record --------------------------------------------------


@functools.cache
def _ramp(length: int) -> np.ndarray:
    return np.arange(length, dtype=np.float64)


def phase(x: np.ndarray, radians: float) -> np.ndarray:
    return x * np.complex64(np.exp(1j * radians))


def frequency_shift(x: np.ndarray, cycles: float) -> np.ndarray:
    turn = np.exp(2j * np.pi * cycles * _ramp(x.shape[-1])).astype(np.complex64)
    return x * turn


def time_shift(x: np.ndarray, samples: int) -> np.ndarray:
    """`x` moved `samples` later along its last axis (earlier if negative), zeros entering."""
    y = np.zeros_like(x)
    length = x.shape[-1]
    if 0 <= samples < length:
        y[..., samples:] = x[..., : length - samples]
    elif -length < samples < 0:
        y[..., :samples] = x[..., -samples:]
    return y


def noise(x: np.ndarray, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """`x` plus complex white Gaussian noise of `fraction` times its mean power."""
    power = float(np.mean(x.real * x.real + x.imag * x.imag))
    scale = np.float32(math.sqrt(power * fraction / 2.0))
    drawn = rng.standard_normal(2 * x.size, dtype=np.float32).view(np.complex64).reshape(x.shape)
    noisy: np.ndarray = x + drawn * scale
    return noisy


def chain_record(x: np.ndarray, draws: Draws, row: int, rng: np.random.Generator) -> np.ndarray:
    """The chain on one record, as per-sample transforms apply it."""
    y = phase(x, float(draws.radians[row]))
    y = frequency_shift(y, float(draws.cycles[row]))
    y = time_shift(y, int(draws.shift[row]))
    if draws.noise_fraction[row] > 0:
        y = noise(y, float(draws.noise_fraction[row]), rng)
    return y


def chain_records(batch: np.ndarray, draws: Draws, rng: np.random.Generator) -> np.ndarray:
    """The chain on every record of `batch` (rows first), one record at a time."""
    return np.stack([chain_record(batch[row], draws, row, rng) for row in range(batch.shape[0])])


# -- torch, the whole batch at once ------------------------------------------


def chain_batch(batch: Any, draws: Draws, generator: Any = None) -> Any:
    """The chain on a complex64 tensor of rows (rows first, time last), one torch op per step.

    The parameters go to tensors once, broadcast over any channel axes
    between rows and time. `generator` is the noise's torch.Generator.
    """
    import torch

    rows, length = batch.shape[0], batch.shape[-1]
    across = (rows,) + (1,) * (batch.dim() - 1)
    radians = torch.from_numpy(draws.radians.astype(np.float32)).view(across)
    cycles = torch.from_numpy(draws.cycles).view(across)
    ramp = torch.arange(length, dtype=torch.float64)
    # Phase and offset as two products, as two transforms of a list apply them.
    x = batch * torch.polar(torch.ones_like(radians), radians)
    turn = (2 * math.pi * cycles * ramp).to(torch.float32)
    x = x * torch.polar(torch.ones_like(turn), turn)
    source = torch.arange(length).view((1,) * (batch.dim() - 1) + (length,)) - torch.from_numpy(
        draws.shift.astype(np.int64)
    ).view(across)
    inside = (source >= 0) & (source < length)
    x = torch.gather(x, -1, source.clamp(0, length - 1).expand(x.shape)) * inside
    fraction = torch.from_numpy(draws.noise_fraction.astype(np.float32)).view(across)
    power = torch.view_as_real(x).square().sum(-1).flatten(1).mean(1).view(across)
    # randn of a complex dtype draws each of I and Q with variance 1/2: CN(0, 1).
    drawn = torch.randn(x.shape, dtype=x.dtype, generator=generator)
    return x + drawn * (power * fraction).sqrt()


# -- scipy's polyphase resampler, record by record ----------------------------


def resample_records(batch: np.ndarray, up: int, down: int) -> np.ndarray:
    """Each record resampled by up/down with `scipy.signal.resample_poly`, cut or zero-filled
    to its stored length (as the reader returns a row without a window)."""
    from scipy.signal import resample_poly

    out = np.zeros_like(batch)
    length = batch.shape[-1]
    for row in range(batch.shape[0]):
        resampled = resample_poly(batch[row], up, down, axis=-1)
        kept = min(length, resampled.shape[-1])
        out[row, ..., :kept] = resampled[..., :kept]
    return out
