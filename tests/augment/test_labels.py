"""Annotation items under every transform, against the reference's label arithmetic.

Time positions move, wrap, reverse and scale with the samples; frequency edges
(relative to the centre, and absolute RF) shift, mirror and stay in Hz under a
resample; both are clipped at the band edge (+-fs/2, where stored edges and
shifts push them) and at the window's edges, and dropped below the chain's
kept fraction. A batch's items are compared row by row, with the stored
items read back from signal_dataset itself.
"""

from __future__ import annotations

import augment_reference as ref
import numpy as np
import pytest
import signal_dataset as sds
from augment_factory import COUNT, FC, FS, LENGTH, burst_row, varied_length

from sds_loader import Annotations, BatchReader, Window
from sds_loader.augment import (
    Chain,
    FrequencyShift,
    Gain,
    Noise,
    Phase,
    Resample,
    SpectralInversion,
    TimeReversal,
    TimeShift,
)

FIELDS = ("times", "edges", "rf", "kind")
SET = Annotations(
    "bursts", FIELDS, positions={"times": "time"}, frequencies={"edges": "relative", "rf": "absolute"}
)
CASES = {
    "pointwise": [Phase(), Gain(db=(-3, 3)), Noise(snr_db=(5, 10))],
    "frequency_shift": [FrequencyShift(fraction=(-0.45, 0.45))],
    "retune": [FrequencyShift(hz=(-3e5, 3e5), retune=True)],
    "invert": [SpectralInversion()],
    "reverse": [TimeReversal()],
    "time_shift_zero": [TimeShift(samples=(-400, 400))],
    "time_shift_circular": [TimeShift(samples=(-900, 900), circular=True)],
    "resample_up": [Resample(factor=(1.2, 1.8))],
    "resample_down": [Resample(factor=(0.4, 0.8))],
    "chain": [
        TimeShift(samples=(-200, 200), circular=True),
        FrequencyShift(hz=(-2e5, 2e5)),
        Resample(factor=(0.6, 1.4), probability=0.7),
        SpectralInversion(probability=0.5),
        TimeReversal(probability=0.5),
        FrequencyShift(fraction=(-0.2, 0.2), retune=True),
        TimeShift(samples=(-50, 50)),
    ],
}


def stored_items(root: str, ordinal: int) -> dict[str, np.ndarray]:
    row = sds.open(root).annotations["bursts"][ordinal]
    return {name: np.asarray(row.fields[name].data) for name in FIELDS}


def check_labels(
    root: str,
    chain: Chain,
    batch: dict[str, np.ndarray],
    ordinals: list[int],
    lengths: list[int],
    window_length: int | None,
) -> int:
    """Compare every row's items with the reference; returns how many items were kept."""
    offsets = batch["bursts.offsets"]
    retunes = [bool(getattr(step, "retune", False)) for step in chain.transforms]
    kept = 0
    for k, ordinal in enumerate(ordinals):
        items = stored_items(root, ordinal)
        steps = ref.steps_of(chain, batch, k)
        window = None if window_length is None else (int(batch["start"][k]), window_length)
        common = dict(
            record_length=lengths[k],
            sample_rate=FS,
            window=window,
            keep_fraction=chain.keep_fraction,
            retune=retunes,
        )
        relative = ref.labels(steps, time=items["times"], frequency=items["edges"], **common)
        absolute = ref.labels(
            steps, time=items["times"], frequency=items["rf"], absolute=True, center_frequency=FC, **common
        )
        row = slice(int(offsets[k]), int(offsets[k + 1]))
        np.testing.assert_array_equal(batch["bursts.kind"][row], items["kind"][relative.source])
        np.testing.assert_array_equal(
            batch["bursts.times"][row], ref.stored_positions(relative.time, np.int64)
        )
        np.testing.assert_allclose(batch["bursts.edges"][row], relative.frequency, rtol=0, atol=1e-6)
        np.testing.assert_allclose(batch["bursts.rf"][row], absolute.frequency, rtol=0, atol=1e-3)
        np.testing.assert_array_equal(absolute.source, relative.source)
        assert batch["augment.center_frequency"][k] == pytest.approx(relative.center_frequency + FC)
        assert batch["augment.sample_rate"][k] == pytest.approx(relative.sample_rate)
        kept += row.stop - row.start
    return kept


def reader(root: str, chain: list, window: Window | None) -> tuple[Chain, BatchReader]:
    made = Chain(
        chain, seed=21, center_frequency="fc", report=("sample_rate", "center_frequency"), keep_fraction=0.25
    )
    extras = ("start",) if window is not None else ()
    return made, BatchReader(
        root, fields=("samples",), augment=made, window=window, annotations=[SET], extras=extras
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_items_follow_each_transform_on_whole_records(captures: str, case: str) -> None:
    chain, made = reader(captures, CASES[case], None)
    ordinals = list(range(COUNT))
    batch = made.read(ordinals, epoch=2)
    kept = check_labels(captures, chain, batch, ordinals, [LENGTH] * COUNT, None)
    assert kept > 0


@pytest.mark.parametrize("case", sorted(CASES))
def test_items_follow_each_transform_then_the_window(varied: str, case: str) -> None:
    window = Window("time", 512, crop="random", pad=True)
    chain, made = reader(varied, CASES[case], window)
    ordinals = [3, 11, 0, 23, 17, 5, 8, 14, 22, 9]
    batch = made.read(ordinals, epoch=4)
    lengths = [varied_length(o) for o in ordinals]
    check_labels(varied, chain, batch, ordinals, lengths, 512)


def test_edges_pushed_past_half_the_sample_rate_are_clipped_or_dropped(captures: str) -> None:
    """A shift of +0.45 fs pushes most edges past +fs/2: each kept one ends at +fs/2 exactly
    or below, and the ones left with less than the kept fraction are gone."""
    chain = Chain([FrequencyShift(fraction=(0.45, 0.45))], seed=1, keep_fraction=0.5)
    relative = Annotations("bursts", ("edges",), frequencies={"edges": "relative"})
    made = BatchReader(captures, fields=("samples",), augment=chain, annotations=[relative])
    ordinals = list(range(COUNT))
    batch = made.read(ordinals)
    edges = batch["bursts.edges"]
    assert np.all(edges <= FS / 2) and np.all(edges >= -FS / 2)
    assert np.any(edges[:, 1] == FS / 2)
    stored = np.concatenate([stored_items(captures, o)["edges"] for o in ordinals])
    assert edges.shape[0] < stored.shape[0]  # some were dropped
    for k, ordinal in enumerate(ordinals):
        want = ref.labels(
            ref.steps_of(chain, batch, k),
            record_length=LENGTH,
            sample_rate=FS,
            frequency=stored_items(captures, ordinal)["edges"],
            keep_fraction=0.5,
        )
        np.testing.assert_allclose(
            edges[batch["bursts.offsets"][k] : batch["bursts.offsets"][k + 1]], want.frequency
        )


def test_absolute_edges_without_a_centre_frequency_are_refused(captures: str) -> None:
    with pytest.raises(ValueError, match="centre frequency: pass Chain\\(center_frequency="):
        BatchReader(captures, fields=("samples",), augment=[SpectralInversion()], annotations=[SET])


def test_a_padded_windows_items_are_clipped_at_their_records_end(varied: str) -> None:
    """Time items reaching past a record's end count only what the record holds, also where a padded
    window reaches past it too: the kept fraction is of the item clipped to the record, then to the
    window (the record's end being what the read says as it decodes the row)."""
    window = Window("time", 512, pad=True)
    ordinals = list(range(COUNT))
    starts = [max(varied_length(o) - 300, 0) for o in ordinals]
    reader = BatchReader(
        varied,
        fields=("samples",),
        window=window,
        annotations=[Annotations("bursts", ("times",), positions={"times": "time"})],
        augment=Chain([Phase()], keep_fraction=0.5),
    )
    batch = reader.read(ordinals, starts=starts)
    offsets = batch["bursts.offsets"]
    dataset = sds.open(varied)
    past_the_end = 0
    for row, ordinal in enumerate(ordinals):
        times = burst_row(dataset, ordinal, varied_length(ordinal)).fields["times"].data.astype(np.float64)
        past_the_end += int(np.sum(times[:, 1] > varied_length(ordinal)))
        clipped = np.clip(np.clip(times, 0, varied_length(ordinal)), starts[row], starts[row] + 512)
        kept = clipped[:, 1] - clipped[:, 0] >= 0.5 * (times[:, 1] - times[:, 0])
        np.testing.assert_array_equal(
            batch["bursts.times"][offsets[row] : offsets[row + 1]], clipped[kept] - starts[row]
        )
    assert past_the_end > 0  # the case the test is about


def test_without_a_chain_items_are_as_before(varied: str) -> None:
    """frequencies= moves nothing without a chain, and positions are clipped by the window as always."""
    window = Window("time", 512, crop="random", pad=True)
    plain = BatchReader(
        varied,
        fields=("samples",),
        window=window,
        annotations=[Annotations("bursts", FIELDS, positions={"times": "time"})],
    )
    declared = BatchReader(varied, fields=("samples",), window=window, annotations=[SET])
    ordinals = list(range(COUNT))
    first, second = plain.read(ordinals), declared.read(ordinals)
    assert sorted(first) == sorted(second)
    for key in first:
        np.testing.assert_array_equal(first[key], second[key])
