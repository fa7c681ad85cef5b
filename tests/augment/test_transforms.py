"""Every transform, read through BatchReader, against the float64 reference recomputed from the
batch's own parameter keys: whole records, windows (the chain on the whole record, then the
window cut), and every layout a chain runs on (complex64, float32 and float64 IQ pairs)."""

from __future__ import annotations

import augment_reference as ref
import numpy as np
import pytest
import signal_dataset as sds
from augment_factory import FS, LENGTH

from sds_loader import BatchReader, Window
from sds_loader.augment import (
    Chain,
    FrequencyShift,
    Gain,
    IQImbalance,
    Noise,
    Phase,
    Resample,
    SpectralInversion,
    TimeReversal,
    TimeShift,
)

#: The stated tolerance: RMS error over the record's RMS, for complex64 rows.
TOLERANCE = 1e-5
ORDER = [5, 0, 17, 5, 23, 9, 2]

CASES = {
    "phase": [Phase()],
    "frequency_shift_hz": [FrequencyShift(hz=(-2e5, 2e5))],
    "frequency_shift_fraction": [FrequencyShift(fraction=(-0.45, 0.45))],
    "time_shift_zero": [TimeShift(samples=(-300, 300))],
    "time_shift_circular": [TimeShift(samples=(-3000, 3000), circular=True)],
    "time_shift_seconds": [TimeShift(seconds=(-2e-4, 2e-4))],
    # Whole records shift within their row, the modulation before done on
    # the moved samples; shifts past the record's 1,024 samples empty it.
    "modulated_shift": [
        Phase(),
        FrequencyShift(fraction=(-0.3, 0.3)),
        Gain(db=(-6, 6)),
        TimeShift(samples=(-1500, 1500)),
    ],
    "gain": [Gain(db=(-20, 20))],
    "noise": [Noise(snr_db=(-5, 25))],
    "noise_stored_snr": [Noise(snr_db=(0, 12), stored_snr="snr_db")],
    "invert": [SpectralInversion()],
    "reverse": [TimeReversal()],
    "iq_imbalance": [IQImbalance(amplitude_db=(-2, 2), phase_degrees=(-10, 10))],
    "resample_up": [Resample(factor=(1.05, 1.9))],
    "resample_down": [Resample(factor=(0.4, 0.95))],
    "chain": [
        Phase(),
        FrequencyShift(hz=(-1e5, 1e5)),
        TimeShift(samples=(-64, 64), probability=0.8),
        Noise(snr_db=(0, 20), probability=0.7),
        Gain(db=(-6, 6)),
        IQImbalance(amplitude_db=(-1, 1), phase_degrees=(-5, 5), probability=0.5),
        SpectralInversion(probability=0.5),
        TimeReversal(probability=0.5),
        Resample(factor=(0.7, 1.3), probability=0.6),
    ],
}


def record(root: str, field: str, ordinal: int) -> np.ndarray:
    """The stored record as complex128, channels first, time last."""
    data = sds.open(root)[ordinal][field].data
    return ref.as_complex(data).reshape(-1, data.shape[-2] if data.dtype.kind == "f" else data.shape[-1])


def unit_noise(root: str, field: str, chain: Chain, ordinals: list[int], epoch: int) -> dict[int, np.ndarray]:
    """Each noise step's CN(0, 1) noise, from a chain of identities up to it and the noise alone:
    the same key (seed, epoch, ordinal, place, channel, sample) draws the same noise."""
    found: dict[int, np.ndarray] = {}
    for position, step in enumerate(chain.transforms):
        if step.kind != "noise":
            continue
        probe = Chain([Gain(db=0.0)] * position + [Noise(snr_db=0.0)], seed=chain.seed, fields=(field,))
        batch = BatchReader(root, fields=(field,), augment=probe).read(ordinals, epoch=epoch)
        sigma = np.sqrt(batch[f"augment.{position}.noise.sigma2"])
        for k, ordinal in enumerate(ordinals):
            row = ref.as_complex(batch[field][k]).reshape(record(root, field, ordinal).shape)
            found.setdefault(position, {})[ordinal] = (row - record(root, field, ordinal)) / sigma[k]  # type: ignore[index]
    return found


def check_rows(
    root: str,
    field: str,
    chain: Chain,
    batch: dict[str, np.ndarray],
    ordinals: list[int],
    epoch: int,
    starts: np.ndarray | None = None,
    length: int | None = None,
) -> None:
    noises = unit_noise(root, field, chain, sorted(set(ordinals)), epoch)
    for k, ordinal in enumerate(ordinals):
        x = record(root, field, ordinal)
        noise = {position: by_ordinal[ordinal] for position, by_ordinal in noises.items()}  # type: ignore[index]
        want = ref.apply(x, ref.steps_of(chain, batch, k), unit_noise=noise)
        start = 0 if starts is None else int(starts[k])
        want = ref.cut(want, start, x.shape[-1] if length is None else length)
        got = ref.as_complex(batch[field][k]).reshape(want.shape)
        error = ref.rms_error(got, want, x)
        assert error < TOLERANCE, (
            ordinal,
            error,
            {key: batch[key][k] for key in batch if key.startswith("augment.")},
        )


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_transform_matches_the_reference_on_whole_records(captures: str, case: str) -> None:
    chain = Chain(CASES[case], seed=11)
    batch = BatchReader(captures, fields=("samples",), augment=chain).read(ORDER, epoch=3)
    applied = np.stack([batch[f"augment.{p}.{s.kind}.applied"] for p, s in enumerate(chain.transforms)])
    if case != "chain":
        assert applied.all()  # probability 1: every row applies it
    check_rows(captures, "samples", chain, batch, ORDER, epoch=3)


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_transform_matches_the_reference_under_a_window(captures: str, case: str) -> None:
    chain = Chain(CASES[case], seed=12)
    window = Window("time", 300, crop="random", pad=True)
    reader = BatchReader(captures, fields=("samples",), augment=chain, window=window, extras=("start",))
    batch = reader.read(ORDER, epoch=1)
    assert batch["samples"].shape == (len(ORDER), 2, 300)
    check_rows(captures, "samples", chain, batch, ORDER, epoch=1, starts=batch["start"], length=300)


@pytest.mark.parametrize("root_name, field", [("pairs32", "iq"), ("pairs64", "iq")])
def test_real_iq_pairs_are_augmented_as_complex(
    request: pytest.FixtureRequest, root_name: str, field: str
) -> None:
    root = request.getfixturevalue(root_name)
    chain = Chain(CASES["chain"], seed=4)
    batch = BatchReader(root, fields=(field,), augment=chain).read(ORDER, epoch=0)
    assert batch[field].shape == (len(ORDER), LENGTH, 2)
    assert batch[field].dtype == (np.float32 if root_name == "pairs32" else np.float64)
    check_rows(root, field, chain, batch, ORDER, epoch=0)


def test_noise_reaches_its_target_power(captures: str) -> None:
    """sigma2 is the measured power over the target SNR, and the noise added has that power (2%)."""
    chain = Chain([Noise(snr_db=(0, 20))], seed=2)
    ordinals = list(range(8))
    batch = BatchReader(captures, fields=("samples",), augment=chain).read(ordinals)
    for k, ordinal in enumerate(ordinals):
        x = record(captures, "samples", ordinal)
        power = float(np.mean(np.abs(x) ** 2))
        sigma2, after = ref.noise_sigma2(power, float(batch["augment.0.noise.snr_db"][k]))
        assert batch["augment.0.noise.sigma2"][k] == pytest.approx(sigma2, rel=1e-6)
        assert batch["augment.0.noise.snr_after_db"][k] == pytest.approx(after, abs=1e-9)
        added = ref.as_complex(batch["samples"][k]) - x
        assert np.mean(np.abs(added) ** 2) == pytest.approx(sigma2, rel=0.05)  # 2,048 samples a row
    everything = np.concatenate(
        [
            (ref.as_complex(batch["samples"][k]) - record(captures, "samples", o)).ravel()
            / np.sqrt(batch["augment.0.noise.sigma2"][k])
            for k, o in enumerate(ordinals)
        ]
    )
    # Pooled, the noise's power is its target within 2% (a 1/sqrt(n) spread:
    # 0.8% over these 16,384 samples, 1.6% over 4,096, where 2% is 1.3 of it).
    assert everything.size == 16384
    assert np.mean(np.abs(everything) ** 2) == pytest.approx(1.0, rel=0.02)
    assert np.mean(np.abs(everything[:4096]) ** 2) == pytest.approx(1.0, rel=0.02 * 2)


def test_a_stored_snr_adds_only_the_noise_missing(captures: str) -> None:
    chain = Chain([Noise(snr_db=(0, 12), stored_snr="snr_db")], seed=5)
    ordinals = list(range(12))
    batch = BatchReader(captures, fields=("samples",), augment=chain).read(ordinals)
    for k, ordinal in enumerate(ordinals):
        x = record(captures, "samples", ordinal)
        stored_db = 3.0 + ordinal % 7
        sigma2, after = ref.noise_sigma2(
            float(np.mean(np.abs(x) ** 2)), float(batch["augment.0.noise.snr_db"][k]), stored_db
        )
        assert batch["augment.0.noise.sigma2"][k] == pytest.approx(sigma2, rel=1e-6, abs=1e-12)
        assert batch["augment.0.noise.snr_after_db"][k] == pytest.approx(after, abs=1e-9)
        if batch["augment.0.noise.snr_db"][k] > stored_db:
            assert batch["augment.0.noise.sigma2"][k] == 0.0
            np.testing.assert_array_equal(batch["samples"][k], x.astype(np.complex64))


def test_a_frequency_shift_in_hz_uses_the_axis_sample_rate(captures: str) -> None:
    chain = Chain([FrequencyShift(hz=(-1e5, 1e5))], seed=1)
    batch = BatchReader(captures, fields=("samples",), augment=chain).read(ORDER)
    np.testing.assert_allclose(
        batch["augment.0.frequency_shift.hz"], batch["augment.0.frequency_shift.fraction"] * FS
    )
    assert np.all(np.abs(batch["augment.0.frequency_shift.hz"]) <= 1e5)
    assert len(set(batch["augment.0.frequency_shift.hz"][[0, 2, 4]].tolist())) == 3


def test_changed_metadata_comes_back_where_asked(captures: str) -> None:
    chain = Chain(
        [
            FrequencyShift(hz=(-1e5, 1e5), retune=True, probability=0.5),
            Resample(factor=(0.5, 2.0), probability=0.5),
            Noise(snr_db=(0, 12), stored_snr="snr_db", probability=0.5),
        ],
        seed=8,
        center_frequency="fc",
        report=("sample_rate", "center_frequency", "snr_db"),
    )
    ordinals = list(range(24))
    batch = BatchReader(captures, fields=("samples",), augment=chain).read(ordinals, epoch=1)
    shifted = np.where(batch["augment.0.frequency_shift.applied"], batch["augment.0.frequency_shift.hz"], 0.0)
    np.testing.assert_allclose(batch["augment.center_frequency"], 915e6 - shifted)
    factor = np.where(batch["augment.1.resample.applied"], batch["augment.1.resample.factor"], 1.0)
    np.testing.assert_allclose(batch["augment.sample_rate"], FS * factor)
    stored_db = np.array([3.0 + o % 7 for o in ordinals])
    noisy = batch["augment.2.noise.applied"]
    np.testing.assert_array_equal(
        batch["augment.snr_db"], np.where(noisy, batch["augment.2.noise.snr_after_db"], stored_db)
    )
    assert 0 < noisy.sum() < len(ordinals)
