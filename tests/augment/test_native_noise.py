"""Noise from the counter stream: its power, its statistics, and its bytes whatever reads it.

The noise step measures the row's power over its span inside the record,
works out sigma2 (and the SNR after) as augment_reference.noise_sigma2 does,
and adds CN(0, sigma2) keyed by (seed, epoch, ordinal, position, channel,
record index): the same record gets the same bytes whatever its batch,
threads or window; another epoch, seed, ordinal or channel other noise.
"""

from __future__ import annotations

import math

import augment_reference as ref
import numpy as np
import pytest
from augment_native import run, signal

NAN = float("nan")


def noise_of(record, steps_before, noise_params, **options):
    """The row, the noise the core added to it (row minus the reference without noise), params after."""
    steps = [*steps_before, ("noise", noise_params)]
    got, params = run([record], [steps], **options)
    clean = ref.apply(record, steps_before) if steps_before else record.astype(np.complex128)
    return got[0], got[0] - clean, params[0, len(steps_before)]


@pytest.mark.parametrize("dtype", ["complex64", "complex128", "pairs"])
def test_sigma2_and_the_snr_after_follow_the_reference(dtype):
    record = signal(2, 4096, seed=4)
    before = [("phase", [1, 0.3, 0, 0])]
    for target, stored in ((10.0, NAN), (-3.0, NAN), (5.0, 20.0), (25.0, 20.0)):
        _, added, params = noise_of(record, before, [1, target, stored, 0], dtype=dtype)
        power = float(np.mean(np.abs(ref.apply(record, before)) ** 2))
        sigma2, after = ref.noise_sigma2(power, target, stored)
        assert params[3] == pytest.approx(sigma2, rel=1e-5)
        assert params[2] == pytest.approx(after, abs=1e-6)
        if sigma2 == 0:
            # A target above the stored SNR adds nothing: the SNR after is the stored one.
            assert np.max(np.abs(added)) < 1e-5 and params[2] == pytest.approx(stored)


def test_its_power_lands_on_the_target():
    # CN(0, sigma2) measured over 4,096 samples fluctuates by 1/64 (1.6%) of
    # its power: each of 64 rows within 5 of those (8%), their mean within 1%
    # (0.2% expected), and the rows' spread that of Gaussian noise.
    record = signal(1, 4096, seed=9)
    ratios = []
    for ordinal in range(64):
        got, params = run([record], [[("noise", [1, 6.0, NAN, 0])]], ordinals=[ordinal])
        added = got[0] - record
        ratios.append(float(np.mean(np.abs(added) ** 2)) / params[0, 0, 3])
    ratios = np.array(ratios)
    assert np.all(np.abs(ratios - 1) < 0.08), ratios
    assert abs(ratios.mean() - 1) < 0.01, ratios.mean()
    assert 0.5 / 64 < ratios.std() < 2 / 64, ratios.std()


def test_the_noise_is_circular_gaussian():
    record = np.zeros((1, 1 << 16), dtype=np.complex128) + 1.0
    got, params = run([record], [[("noise", [1, 0.0, NAN, 0])]], dtype="complex128")
    unit = (got[0, 0] - 1.0) / math.sqrt(params[0, 0, 3] / 2)  # I and Q each N(0, 1)
    for part in (unit.real, unit.imag):
        assert abs(part.mean()) < 0.02 and abs(part.var() - 1) < 0.02
        kurtosis = float(np.mean(part**4))
        assert abs(kurtosis - 3) < 0.1
        # The share beyond 1, 2 and 3 sigma is the normal law's.
        for k, share in ((1, 0.3173), (2, 0.0455), (3, 0.0027)):
            assert abs(np.mean(np.abs(part) > k) - share) < 0.2 * share + 0.002
    assert abs(np.mean(unit.real * unit.imag)) < 0.02
    # Neighbouring samples are independent.
    assert abs(np.mean(unit[1:] * np.conj(unit[:-1]))) < 0.03


def test_the_same_record_gets_the_same_bytes_whatever_its_batch_or_threads():
    records = [signal(2, 2048, seed=s) for s in range(8)]
    steps = [("frequency_shift", [1, 0.01, 0, 0]), ("noise", [1, 3.0, NAN, 0]), ("time_shift", [1, 5, 1, 0])]
    one, params_one = run(records, [steps] * 8, ordinals=range(100, 108), threads=1)
    for threads in (2, 3, 8):
        again, params_again = run(records, [steps] * 8, ordinals=range(100, 108), threads=threads)
        assert again.tobytes() == one.tobytes() and params_again.tobytes() == params_one.tobytes()
    # Ordinal 105 alone, and in another batch at another place.
    alone, _ = run([records[5]], [steps], ordinals=[105])
    assert alone[0].tobytes() == one[5].tobytes()
    other, _ = run([records[2], records[5]], [steps, steps], ordinals=[7, 105], threads=2)
    assert other[1].tobytes() == one[5].tobytes()


@pytest.mark.parametrize(
    "before",
    [[], [("time_shift", [1, 300, 1, 0])], [("reverse", [1, 0, 0, 0])], [("gain", [1, 2.0, 0, 0])]],
    ids=["alone", "after a circular shift", "after a reversal", "after a gain"],
)
def test_a_windows_noise_is_the_whole_records_noise_bit_for_bit(before):
    # On a record of constant power every span measures the same power, so
    # sigma2 is the same and the noise of a window is exactly the whole
    # record's noise at those indices, computed afresh on the window's span.
    length = 3000
    record = np.ones((2, length), dtype=np.complex128)
    steps = [*before, ("noise", [1, 2.0, NAN, 0])]
    for dtype in ("complex64", "complex128"):
        whole, params = run([record], [steps], dtype=dtype)
        for start, size in [(0, 257), (1000, 1000), (2999, 1), (123, 2877), (5, 2)]:
            part, part_params = run([record], [steps], dtype=dtype, window=([start], size))
            assert part_params[0, -1, 3] == params[0, -1, 3]
            assert part[0].tobytes() == whole[0][:, start : start + size].tobytes(), (dtype, start, size)


def test_a_windows_noise_after_a_zero_fill_shift_is_keyed_by_the_record_index():
    # Zeros enter the whole record, so a window's power (and sigma2) differs;
    # the unit noise, keyed by index, is the same (on the zeros entering too:
    # they are the record's), and past the record's end there is none.
    record = np.ones((1, 3000), dtype=np.complex128)
    steps = [("time_shift", [1, -37, 0, 0]), ("noise", [1, 2.0, NAN, 0])]
    clean = ref.apply(record, steps[:1])
    whole, params = run([record], [steps], dtype="complex128")
    unit_whole = (whole[0] - clean) / math.sqrt(params[0, 1, 3])
    for start, size in [(100, 500), (2900, 100), (2950, 200)]:
        part, part_params = run([record], [steps], dtype="complex128", window=([start], size))
        unit_part = (part[0] - ref.cut(clean, start, size)) / math.sqrt(part_params[0, 1, 3])
        inside = slice(0, min(size, 3000 - start))
        assert np.max(np.abs(unit_part[:, inside] - unit_whole[:, start : start + size][:, inside])) < 1e-6
        assert not np.any(part[0, :, inside.stop :])


def test_another_epoch_seed_ordinal_or_channel_draws_other_noise():
    record = np.ones((2, 1024), dtype=np.complex128)
    steps = [("noise", [1, 0.0, NAN, 0])]
    base, _ = run([record], [steps], seed=1, epoch=0, ordinals=[0])
    assert not np.allclose(base[0, 0], base[0, 1])  # channels differ
    for options in (
        {"seed": 2, "epoch": 0, "ordinals": [0]},
        {"seed": 1, "epoch": 1, "ordinals": [0]},
        {"seed": 1, "epoch": 0, "ordinals": [1]},
    ):
        other, _ = run([record], [steps], **options)
        assert np.corrcoef(other[0, 0].real, base[0, 0].real)[0, 1] < 0.1
    # The transform's place in the chain keys it too.
    moved, _ = run([record], [[("phase", [0, 0, 0, 0]), *steps]], seed=1, epoch=0, ordinals=[0])
    assert np.corrcoef(moved[0, 0].real, base[0, 0].real)[0, 1] < 0.1


def test_the_power_is_that_of_the_rows_span_inside_the_record_and_no_noise_lands_outside():
    record = signal(1, 1000, seed=6)
    steps = [("noise", [1, 10.0, NAN, 0])]
    got, params = run([record], [steps], window=([-200], 700), dtype="complex128")
    power = float(np.mean(np.abs(record[0, :500]) ** 2))
    assert params[0, 0, 3] == pytest.approx(power / 10, rel=1e-9)
    assert not np.any(got[0, 0, :200])  # before the record: zero, no noise
    assert np.any(got[0, 0, 200:] != record[0, :500])


def test_a_silent_row_gets_no_noise():
    record = np.zeros((1, 512), dtype=np.complex128)
    got, params = run([record], [[("noise", [1, 10.0, NAN, 0])]])
    assert not np.any(got) and params[0, 0, 3] == 0.0 and params[0, 0, 2] == 10.0


def test_a_row_that_skips_the_noise_keeps_its_parameters_and_samples():
    record = signal(1, 512, seed=1)
    got, params = run([record], [[("noise", [0, 10.0, NAN, 0])]])
    assert np.array_equal(got[0], record.astype(np.complex64).astype(np.complex128))
    assert params[0, 0, 3] == 0 and math.isnan(params[0, 0, 2])
