"""Label items that follow a chain: time positions and frequency edges, in physical units.

An annotation set declares which of its fields are time positions along the
records' time axis (``Annotations(positions={"bursts": "time"})``, items
``[start, stop)`` in samples) and which are frequency edges
(``Annotations(frequencies={"edges": "relative"})``, items ``[low, high]`` in
Hz, relative to the capture's centre or absolute RF). Each row's items follow
its chain step by step, in the chain's order:

- time: clipped to the record; moved by a time shift (zero fill: clipped to
  the record again; circular: wrapped round, an item crossing the end
  becoming two pieces); reversed to ``[N - stop, N - start)``; scaled by a
  resample's factor and clipped to its ``ceil(N r)`` samples; finally cut by
  the window (the row itself without one) and shifted to its start;
- frequency: moved by a frequency shift (``fraction * fs`` Hz at that step;
  a retune moves the centre instead, so absolute edges stay); mirrored to
  ``[-high, -low]`` by a spectral inversion or a time reversal; unchanged in
  Hz by a resample. After every step they are clipped to the band the data
  holds there: ``+-fs/2`` at that step's sample rate, and under a resample
  its passband ``+-RESAMPLE_PASSBAND * min(fs, fs r) / 2``.

One rule keeps or drops (`Chain(keep_fraction=k)`): an item (each piece of a
wrapped one) is kept when every clip left it overlapping (``stop > low`` and
``start < high``) and its kept extent is at least k times its unclipped
extent (time: stored times every resample factor; frequency: stored, in Hz)
in each dimension it has; otherwise it is dropped from every field of its
set. Positions are worked in float64 and returned in the field's dtype:
integer time positions take every sample the item touches (start rounded
down, stop up), integer frequencies are rounded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from sds_loader.augment.chain import Chain
from sds_loader.augment.draws import Drawn, retuned

#: The resampler's passband as a fraction of the lower rate's Nyquist band
#: (csrc/augment/resampler.h, kResamplePassband).
RESAMPLE_PASSBAND = 0.9


@dataclass
class Placement:
    """Where each row's window sits in its final record: starts and a length (None: the whole
    stored record, whose length the row keeps)."""

    starts: np.ndarray | None
    length: int | None


class _Items:
    """A set's items as float64 working copies, with the bookkeeping that follows them."""

    def __init__(self, row_of: np.ndarray, count: int) -> None:
        self.row_of = row_of
        self.source = np.arange(count, dtype=np.int64)
        self.alive = np.ones(count, dtype=bool)
        self.time: dict[str, np.ndarray] = {}
        self.time_full: dict[str, np.ndarray] = {}
        self.freq: dict[str, np.ndarray] = {}
        self.freq_full: dict[str, np.ndarray] = {}

    def clip(self, values: np.ndarray, low: np.ndarray, high: np.ndarray) -> None:
        self.alive &= (values[:, 1] > low) & (values[:, 0] < high)
        np.clip(values, low[:, None], high[:, None], out=values)

    def split(self, name: str, over: np.ndarray, length: np.ndarray) -> None:
        """Items `over` of time field `name`, wrapped past `length`: cut there, the rest a piece at 0."""
        values = self.time[name]
        extra = np.column_stack([np.zeros(int(over.sum())), values[over, 1] - length[over]])
        values[over, 1] = length[over]
        self.time[name] = np.concatenate([values, extra])
        for table in (self.time_full, self.freq, self.freq_full):
            for key, array in table.items():
                table[key] = np.concatenate([array, array[over]])
        for other in self.time:
            if other != name:
                self.time[other] = np.concatenate([self.time[other], self.time[other][over]])
        self.source = np.concatenate([self.source, self.source[over]])
        self.alive = np.concatenate([self.alive, self.alive[over]])
        self.row_of = np.concatenate([self.row_of, self.row_of[over]])


def follow(
    *,
    chain: Chain,
    drawn: Drawn,
    name: str,
    items: Mapping[str, np.ndarray],
    counts: np.ndarray,
    time_fields: tuple[str, ...],
    frequency_fields: Mapping[str, str],
    placement: Placement,
    center_frequency: np.ndarray | None,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Set `name`'s items after the chain and the window, and each row's new count."""
    rows = counts.size
    row_of = np.repeat(np.arange(rows, dtype=np.int64), counts)
    work = _Items(row_of, int(row_of.size))
    for field in time_fields:
        values = _pairs(name, field, items[field], "positions")
        work.time[field] = values
        work.time_full[field] = values[:, 1] - values[:, 0]
    for field, mode in frequency_fields.items():
        values = _pairs(name, field, items[field], "frequencies")
        if mode == "absolute":
            assert center_frequency is not None
            values -= center_frequency[row_of][:, None]
        work.freq[field] = values
        work.freq_full[field] = values[:, 1] - values[:, 0]
    lengths = drawn.lengths.astype(np.float64)
    rates = drawn.sample_rates
    for field in work.time:
        work.clip(work.time[field], np.zeros(row_of.size), lengths[row_of, 0])
    _clip_band(work, rates[work.row_of, 0] / 2)
    for position, step in enumerate(chain.transforms):
        _step(work, step.kind, bool(getattr(step, "retune", False)), drawn, position, lengths)
        _clip_band(work, rates[work.row_of, position + 1] / 2)
    if placement.starts is not None:
        assert placement.length is not None
        low = placement.starts.astype(np.float64)[work.row_of]
        span = float(placement.length)
    else:
        low = np.zeros(work.row_of.size)
        span = None
    for field, values in work.time.items():
        high = low + span if span is not None else lengths[work.row_of, 0]
        work.clip(values, low, high)
        values -= low[:, None]
        work.alive &= (values[:, 1] - values[:, 0]) >= chain.keep_fraction * work.time_full[field]
    for field, values in work.freq.items():
        work.alive &= (values[:, 1] - values[:, 0]) >= chain.keep_fraction * work.freq_full[field]
        if frequency_fields[field] == "absolute":
            assert center_frequency is not None
            values += (center_frequency - retuned(chain, drawn))[work.row_of][:, None]
    first = next(iter(work.time.values()))[:, 0] if work.time else np.zeros(work.source.size)
    order = np.lexsort((first, work.source))
    order = order[work.alive[order]]
    out: dict[str, np.ndarray] = {}
    for field, values in items.items():
        if field in work.time:
            out[field] = _stored(work.time[field][order], values.dtype, time=True)
        elif field in work.freq:
            out[field] = _stored(work.freq[field][order], values.dtype, time=False)
        else:
            out[field] = values[work.source[order]]
    new_counts = np.bincount(work.row_of[order], minlength=rows).astype(np.int64)
    return out, new_counts


def _pairs(name: str, field: str, values: np.ndarray, argument: str) -> np.ndarray:
    if values.ndim != 2 or values.shape[1] != 2:
        raise ValueError(
            f"annotation set {name!r}: {argument} field {field!r} has items of shape {values.shape[1:]}, "
            f"not (2,) pairs; drop it from {argument}="
        )
    return values.astype(np.float64)


def _clip_band(work: _Items, half: np.ndarray) -> None:
    for values in work.freq.values():
        work.clip(values, -half, half)


def _step(work: _Items, kind: str, retune: bool, drawn: Drawn, position: int, lengths: np.ndarray) -> None:
    """Move the items of every row the step applied to."""
    params = drawn.params[work.row_of, position, :]
    applied = params[:, 0] != 0
    if not applied.any():
        return
    length = lengths[work.row_of, position]
    if kind == "frequency_shift":
        hz = np.where(applied, params[:, 1] * drawn.sample_rates[work.row_of, position], 0.0)
        for values in work.freq.values():
            values += hz[:, None]
    elif kind in ("invert", "reverse"):
        for values in work.freq.values():
            values[applied] = -values[applied][:, ::-1]
    if kind == "time_shift":
        _time_shift(work, params, applied, length)
    elif kind == "reverse":
        for values in work.time.values():
            values[applied] = length[applied][:, None] - values[applied][:, ::-1]
    elif kind == "resample":
        factor = np.where(applied, params[:, 1], 1.0)
        after = lengths[work.row_of, position + 1]
        for field, values in work.time.items():
            values *= factor[:, None]
            work.time_full[field] = work.time_full[field] * factor
            work.clip(values, np.zeros(after.size), after)
        rate = drawn.sample_rates[work.row_of, position]
        edge = np.where(applied, RESAMPLE_PASSBAND * np.minimum(rate, rate * factor) / 2, np.inf)
        _clip_band(work, edge)


def _time_shift(work: _Items, params: np.ndarray, applied: np.ndarray, length: np.ndarray) -> None:
    shift = np.where(applied, params[:, 1], 0.0)
    circular = applied & (params[:, 2] != 0)
    for field in list(work.time):
        values = work.time[field]
        values += shift[:, None]
        if circular.any():
            wrap = np.where(circular, np.floor(values[:, 0] / length) * length, 0.0)
            values -= wrap[:, None]
            over = circular & (values[:, 1] > length)
            if over.any():
                count = values.shape[0]
                work.split(field, over, length)
                grown = work.time[field].shape[0] - count
                length = np.concatenate([length, length[over]])
                circular = np.concatenate([circular, np.zeros(grown, dtype=bool)])
                shift = np.concatenate([shift, np.zeros(grown)])
                values = work.time[field]
        work.clip(values, np.zeros(values.shape[0]), length)


def _stored(values: np.ndarray, dtype: np.dtype, *, time: bool) -> np.ndarray:
    if np.issubdtype(dtype, np.integer):
        if time:
            values = np.column_stack([np.floor(values[:, 0]), np.ceil(values[:, 1])])
        else:
            values = np.rint(values)
        return values.astype(dtype)
    return values.astype(dtype)
