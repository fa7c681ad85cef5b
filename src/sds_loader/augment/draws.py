"""A batch's draws: each row's parameters for each transform, and the keys that report them.

Every draw comes from the native counter-based generator keyed by (seed,
epoch, ordinal, the transform's place in the chain, draw number): a pure
function of the key, so a record's augmentation is the same whatever its
batch, thread, worker, rank or resume. Draw 0 of a transform decides whether
it applies (``u < probability``); draws 1.. are its parameters, mapped onto
their ranges by the transform itself, at the sample rate the row has at that
step (a resample before it changes it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from sds_loader.augment.chain import Chain
from sds_loader.augment.transforms import KINDS, Context

#: The prefix of every batch key a chain adds.
PREFIX = "augment"


@dataclass
class Drawn:
    """A batch's draws, as the native core takes them and the labels follow them."""

    kinds: np.ndarray
    #: (rows, steps, 4): [applied, p1, p2, p3]; the core writes a noise step's p2 and p3.
    params: np.ndarray
    #: What each step's parameters were drawn with (its rows' sample rates at that step).
    contexts: tuple[Context, ...]
    #: (rows, steps + 1): each row's record length before each step, and after the last.
    lengths: np.ndarray
    #: (rows, steps + 1): each row's sample rate likewise (NaN where unknown).
    sample_rates: np.ndarray

    @property
    def final_lengths(self) -> np.ndarray:
        return np.ascontiguousarray(self.lengths[:, -1])


def kinds_of(chain: Chain) -> np.ndarray:
    return np.asarray([KINDS[step.kind] for step in chain.transforms], dtype=np.int32)


def draw(
    chain: Chain,
    *,
    seed: int,
    epoch: int,
    ordinals: np.ndarray,
    record_lengths: np.ndarray,
    sample_rate: np.ndarray,
    stored_snr: Mapping[str, np.ndarray],
    rate_known: bool,
) -> Drawn:
    """Each row's parameters for every step of `chain` (one native draw call per step)."""
    from sds_loader import _native

    rows = int(ordinals.size)
    steps = len(chain.transforms)
    params = np.zeros((rows, steps, 4), dtype=np.float64)
    lengths = np.empty((rows, steps + 1), dtype=np.int64)
    rates = np.empty((rows, steps + 1), dtype=np.float64)
    length = np.asarray(record_lengths, dtype=np.int64)
    rate = np.asarray(sample_rate, dtype=np.float64)
    contexts: list[Context] = []
    stored = dict(stored_snr)
    for position, step in enumerate(chain.transforms):
        lengths[:, position] = length
        rates[:, position] = rate
        uniforms = _native.augment_draw(seed, epoch, ordinals, position, 1 + step.draw_count)
        context = Context(sample_rate=rate, stored_snr=stored, rate_known=rate_known)
        contexts.append(context)
        applied = uniforms[:, 0] < step.probability
        params[:, position, 0] = applied
        params[:, position, 1:] = step.draws(uniforms[:, 1:], context)
        if step.kind == "resample":
            factor = np.where(applied, params[:, position, 1], 1.0)
            length = np.where(applied, np.ceil(length * factor).astype(np.int64), length)
            rate = rate * factor
    lengths[:, steps] = length
    rates[:, steps] = rate
    return Drawn(
        kinds=kinds_of(chain), params=params, contexts=tuple(contexts), lengths=lengths, sample_rates=rates
    )


def keys(chain: Chain, drawn: Drawn) -> dict[str, np.ndarray]:
    """``augment.<position>.<kind>.<parameter>`` for every step: whether it applied, and what it drew.

    A resample also reports the record's length after it (``.length``): with
    no window, the row keeps its stored length, cut or zero-filled past it.
    """
    out: dict[str, np.ndarray] = {}
    for position, step in enumerate(chain.transforms):
        stem = f"{PREFIX}.{position}.{step.kind}"
        params = drawn.params[:, position, :]
        out[f"{stem}.applied"] = params[:, 0] != 0
        for name, values in step.keys(params[:, 1:], drawn.contexts[position]).items():
            out[f"{stem}.{name}"] = values
        if step.kind == "resample":
            out[f"{stem}.length"] = drawn.lengths[:, position + 1].copy()
    return out


def reports(chain: Chain, drawn: Drawn, center_frequency: np.ndarray | None) -> dict[str, np.ndarray]:
    """The metadata the chain changed that `Chain(report=...)` asks for, per row."""
    out: dict[str, np.ndarray] = {}
    if "sample_rate" in chain.report:
        out[f"{PREFIX}.sample_rate"] = drawn.sample_rates[:, -1].copy()
    if "center_frequency" in chain.report:
        assert center_frequency is not None
        out[f"{PREFIX}.center_frequency"] = center_frequency - retuned(chain, drawn)
    if "snr_db" in chain.report:
        snr = np.full(drawn.params.shape[0], np.nan)
        for position, step in enumerate(chain.transforms):
            if step.kind != "noise":
                continue
            params = drawn.params[:, position, :]
            stored = params[:, 2]
            snr = np.where(
                params[:, 0] != 0, stored, np.where(np.isnan(snr), _stored(step, drawn, position), snr)
            )
        out[f"{PREFIX}.snr_db"] = snr
    return out


def _stored(step: object, drawn: Drawn, position: int) -> np.ndarray:
    """A noise step's stored SNR where it did not apply (NaN without one)."""
    key = getattr(step, "stored_snr", None)
    rows = drawn.params.shape[0]
    if key is None:
        return np.full(rows, np.nan)
    return np.asarray(drawn.contexts[position].stored_snr[key], dtype=np.float64)


def retuned(chain: Chain, drawn: Drawn) -> np.ndarray:
    """How far (Hz) each row's centre frequency moved down under retuning frequency shifts."""
    moved = np.zeros(drawn.params.shape[0])
    for position, step in enumerate(chain.transforms):
        if step.kind == "frequency_shift" and getattr(step, "retune", False):
            params = drawn.params[:, position, :]
            moved += np.where(params[:, 0] != 0, params[:, 1] * drawn.sample_rates[:, position], 0.0)
    return moved
