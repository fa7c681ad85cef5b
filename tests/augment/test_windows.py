"""Windows under a chain: a window's start is a position of the augmented record, a random crop
draws it over the augmented record's length, and a window that does not fit is refused as a
window of a stored record is."""

from __future__ import annotations

import numpy as np
import pytest
from augment_factory import COUNT, varied_length

from sds_loader import BatchReader, Window
from sds_loader.augment import Chain, Noise, Phase, Resample, TimeShift


def test_random_crops_land_inside_the_resampled_record(varied: str) -> None:
    chain = Chain([Resample(factor=(0.5, 0.7))], seed=3)
    window = Window("time", 256, crop="random")
    reader = BatchReader(varied, fields=("samples",), window=window, augment=chain, extras=("start",))
    ordinals = list(range(COUNT))
    batch = reader.read(ordinals, epoch=2)
    final = batch["augment.0.resample.length"]
    np.testing.assert_array_equal(
        final,
        np.ceil(np.array([varied_length(o) for o in ordinals]) * batch["augment.0.resample.factor"]).astype(
            np.int64
        ),
    )
    assert np.all(batch["start"] + 256 <= final)
    np.testing.assert_array_equal(reader.window_starts(ordinals, seed=0, epoch=2), batch["start"])
    assert not np.array_equal(reader.window_starts(ordinals, seed=0, epoch=3), batch["start"])


def test_a_window_past_the_augmented_record_is_refused_or_padded(varied: str) -> None:
    chain = Chain([Resample(factor=(0.5, 0.5))], seed=3)
    # Record 0 holds 700 samples, 350 after the chain.
    cut = BatchReader(varied, fields=("samples",), window=Window("time", 256), augment=chain)
    with pytest.raises(
        IndexError, match="record 0: window of 256 positions at start 200 does not fit in its 350"
    ):
        cut.read([0], starts=[200])
    padded = BatchReader(varied, fields=("samples",), window=Window("time", 256, pad=True), augment=chain)
    batch = padded.read([0], starts=[200])
    assert batch["samples_length"].tolist() == [150]
    assert not batch["samples"][0, 150:].any() and batch["samples"][0, :150].all()
    with pytest.raises(IndexError, match="at start 350 does not fit"):
        padded.read([0], starts=[350])


def test_a_pointwise_chain_reads_the_window_it_is_given(varied: str) -> None:
    """Explicit starts of a chain that keeps samples in place are the stored record's."""
    window = Window("time", 128, pad=True)
    plain = BatchReader(varied, fields=("samples",), window=window)
    shifted = BatchReader(
        varied, fields=("samples",), window=window, augment=Chain([Phase(radians=(1.0, 1.0))])
    )
    moved = BatchReader(
        varied, fields=("samples",), window=window, augment=Chain([TimeShift(samples=(5, 5))])
    )
    starts = [650, 10, 40]  # record 0 (700 samples): a window past its end
    ordinals = [0, 1, 2]
    want = plain.read(ordinals, starts=starts)
    got = shifted.read(ordinals, starts=starts)
    np.testing.assert_allclose(got["samples"], want["samples"] * np.exp(1j), rtol=0, atol=1e-6)
    np.testing.assert_array_equal(got["samples_length"], want["samples_length"])
    later = moved.read(ordinals, starts=[s + 5 for s in starts])
    # The shift pushes the last 5 stored samples past the record's end: record 0 keeps 45 of its 50.
    np.testing.assert_array_equal(later["samples"][1:], want["samples"][1:])
    np.testing.assert_array_equal(later["samples"][0, :45], want["samples"][0, :45])
    assert not later["samples"][0, 45:].any()
    assert later["samples_length"].tolist() == [45, 128, 128]


def test_noise_on_a_padded_window_lands_only_on_the_record_and_measures_only_it(varied: str) -> None:
    """Past its record's end a padded row stays zero, and the noise's power is that of the part the
    record holds: where each row's record ends is what the read says as it decodes the row."""
    window = Window("time", 128, pad=True)
    plain = BatchReader(varied, fields=("samples",), window=window)
    noisy = BatchReader(varied, fields=("samples",), window=window, augment=Chain([Noise(snr_db=(10, 10))]))
    starts = [650, 10, 40]  # record 0 (700 samples) holds 50 of the window's 128
    ordinals = [0, 1, 2]
    want = plain.read(ordinals, starts=starts)
    got = noisy.read(ordinals, starts=starts)
    assert got["samples_length"].tolist() == [50, 128, 128]
    assert not got["samples"][0, ..., 50:].any()
    for row, held in enumerate(got["samples_length"].tolist()):
        clean = want["samples"][row, ..., :held].astype(np.complex128)
        power = float(np.mean(np.abs(clean) ** 2))
        assert got["augment.0.noise.sigma2"][row] == pytest.approx(power / 10.0, rel=1e-6)


def test_fields_the_chain_leaves_alone_are_cut_where_the_window_sits(tmp_path) -> None:
    """A real field along the time axis beside the augmented one keeps the stored window at
    the same start, while the complex field's window is of the shifted record."""
    import signal_dataset as sds
    from sds_factory import write_dataset

    def make(ordinal: int) -> sds.Record:
        n = 500 + 50 * ordinal
        rng = np.random.default_rng(ordinal)
        data = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
        mask = np.arange(n, dtype=np.float32) + 1000 * ordinal
        return sds.Record(
            id=f"m-{ordinal}",
            fields={
                "samples": sds.Field(data, axes=(sds.Axis("time", n),)),
                "mask": sds.Field(mask, axes=(sds.Axis("time", n),)),
            },
            metadata={"label": ordinal},
        )

    root = str(tmp_path / "masked.sds")
    write_dataset(root, 6, make)
    window = Window("time", 100, crop="random", pad=True)
    chain = Chain([TimeShift(samples=(-300, 300))], seed=1)
    plain = BatchReader(root, window=window, targets=("label",))
    augmented = BatchReader(root, window=window, targets=("label",), augment=chain, extras=("start",))
    ordinals = [5, 0, 3, 1]
    batch = augmented.read(ordinals, epoch=1)
    want = plain.read(ordinals, starts=batch["start"])
    np.testing.assert_array_equal(batch["mask"], want["mask"])
    np.testing.assert_array_equal(batch["mask_length"], want["mask_length"])
    np.testing.assert_array_equal(batch["label"], want["label"])
    stored = sds.open(root)
    for k, ordinal in enumerate(ordinals):
        x = stored[ordinal]["samples"].data
        shift = int(batch["augment.0.time_shift.samples"][k])
        shifted = np.zeros_like(x)
        if shift >= 0:
            shifted[shift:] = x[: x.size - shift]
        else:
            shifted[:shift] = x[-shift:]
        start = int(batch["start"][k])
        expected = np.zeros(100, dtype=x.dtype)
        part = shifted[start : start + 100]
        expected[: part.size] = part
        np.testing.assert_array_equal(batch["samples"][k], expected)


def test_by_default_a_chain_takes_the_complex_fields_and_leaves_float_pairs_beside_them(tmp_path) -> None:
    import signal_dataset as sds
    from sds_factory import write_dataset

    def make(ordinal: int) -> sds.Record:
        rng = np.random.default_rng(ordinal)
        data = (rng.standard_normal(256) + 1j * rng.standard_normal(256)).astype(np.complex64)
        pairs = rng.standard_normal((256, 2)).astype(np.float32)
        return sds.Record(
            id=f"p-{ordinal}",
            fields={
                "samples": sds.Field(data, axes=(sds.Axis("time", 256),)),
                "limits": sds.Field(pairs, axes=(sds.Axis("time", 256), sds.Axis("bound", 2))),
            },
        )

    root = str(tmp_path / "pairs_beside.sds")
    write_dataset(root, 4, make)
    plain = BatchReader(root).read([0, 1, 2, 3])
    default = BatchReader(root, augment=[Phase(radians=(1.0, 1.0))]).read([0, 1, 2, 3])
    np.testing.assert_array_equal(default["limits"], plain["limits"])
    np.testing.assert_allclose(default["samples"], plain["samples"] * np.exp(1j), rtol=0, atol=1e-6)
    both = BatchReader(root, augment=Chain([Phase(radians=(1.0, 1.0))], fields=("samples", "limits")))
    turned = both.read([0, 1, 2, 3])["limits"]
    pairs = plain["limits"][..., 0] + 1j * plain["limits"][..., 1]
    np.testing.assert_allclose(turned[..., 0] + 1j * turned[..., 1], pairs * np.exp(1j), rtol=0, atol=1e-6)


def test_two_fields_of_a_record_get_the_same_draws_but_noise_of_their_own(tmp_path) -> None:
    import signal_dataset as sds
    from sds_factory import write_dataset

    def make(ordinal: int) -> sds.Record:
        rng = np.random.default_rng(ordinal)
        data = (rng.standard_normal(1024) + 1j * rng.standard_normal(1024)).astype(np.complex64)
        axes = (sds.Axis("time", 1024),)
        # Two receivers of one emitter: the same samples in two fields.
        return sds.Record(
            id=f"r-{ordinal}", fields={"east": sds.Field(data, axes=axes), "west": sds.Field(data, axes=axes)}
        )

    root = str(tmp_path / "receivers.sds")
    write_dataset(root, 4, make)
    plain = BatchReader(root).read([0, 1, 2, 3])
    chain = Chain([Phase(radians=(1.0, 1.0)), Noise(snr_db=(10.0, 10.0))], fields=("east", "west"))
    batch = BatchReader(root, augment=chain).read([0, 1, 2, 3])
    east = batch["east"] - plain["east"] * np.exp(1j)
    west = batch["west"] - plain["west"] * np.exp(1j)
    # Each field's noise is at its target power, and the two are independent:
    # their correlation is that of unrelated Gaussian noise, not 1.
    power = np.mean(np.abs(plain["east"]) ** 2, axis=1) / 10.0
    np.testing.assert_allclose(np.mean(np.abs(east) ** 2, axis=1), power, rtol=0.1)
    np.testing.assert_allclose(np.mean(np.abs(west) ** 2, axis=1), power, rtol=0.1)
    correlation = np.abs(np.sum(east * np.conj(west), axis=1)) / np.sqrt(
        np.sum(np.abs(east) ** 2, axis=1) * np.sum(np.abs(west) ** 2, axis=1)
    )
    assert np.all(correlation < 0.2), correlation
