"""Each native augmentation kernel against the float64 numpy reference.

Every transform on whole records of every supported layout (complex64,
complex128, float32 IQ pairs; one and two channels), computed by the core
from the parameters the batch would return, against augment_reference's
definition: within 1e-5 of the record's RMS for the float32 layouts (the
issue's tolerance), far closer for complex128 except where the resampler's
interpolated kernel bank sets the error.
"""

from __future__ import annotations

import math

import augment_reference as ref
import numpy as np
import pytest
from augment_native import expected, run, signal
from native_required import _native

DTYPES = ["complex64", "complex128", "pairs"]
# The error each layout may show against the reference: float32 rounding,
# and the resampler's kernel bank (linear interpolation between its phases).
TOLERANCE = {"complex64": 1e-5, "pairs": 1e-5, "complex128": 1e-12}
RESAMPLE_TOLERANCE = 1e-5

STEPS = {
    "phase": [("phase", [1, 2.1, 0, 0])],
    "phase negative": [("phase", [1, -3.0, 0, 0])],
    "frequency_shift": [("frequency_shift", [1, 0.137, 0, 0])],
    "frequency_shift past nyquist": [("frequency_shift", [1, -0.71, 0, 0])],
    "gain": [("gain", [1, 3.5, 0, 0])],
    "gain zero": [("gain", [1, 0.0, 0, 0])],
    "invert": [("invert", [1, 0, 0, 0])],
    "reverse": [("reverse", [1, 0, 0, 0])],
    "iq_imbalance": [("iq_imbalance", [1, 1.5, 0.3, 0])],
    "iq_imbalance negative": [("iq_imbalance", [1, -2.0, -0.2, 0])],
    "time_shift zero right": [("time_shift", [1, 37, 0, 0])],
    "time_shift zero left": [("time_shift", [1, -250, 0, 0])],
    "time_shift zero past the record": [("time_shift", [1, 5000, 0, 0])],
    "time_shift circular right": [("time_shift", [1, 300, 1, 0])],
    "time_shift circular left": [("time_shift", [1, -77, 1, 0])],
    "time_shift circular many turns": [("time_shift", [1, 3 * 1000 + 11, 1, 0])],
    "not applied": [("frequency_shift", [0, 0.3, 0, 0]), ("time_shift", [0, 40, 1, 0])],
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(STEPS))
def test_each_pointwise_and_time_transform_matches_the_reference(name, dtype):
    record = signal(2, 1000, seed=3)
    steps = STEPS[name]
    got, _ = run([record], [steps], dtype=dtype)
    want = expected(record, steps)
    assert ref.rms_error(got[0], want, record) < TOLERANCE[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("factor", [1.0, 2.0, 1.37, math.sqrt(2), 0.5, 0.61, 1 / math.e, 0.1, 3.3])
def test_resampling_by_any_factor_matches_the_direct_sum(factor, dtype):
    record = signal(1, 700, seed=5)
    steps = [("resample", [1, factor, 0, 0])]
    got, _ = run([record], [steps], dtype=dtype)
    want = expected(record, steps)  # the row keeps N_0 samples: cut, or zero past ceil(N r)
    assert ref.rms_error(got[0], want, record) < RESAMPLE_TOLERANCE
    # Past the resampled record's end the row is zero.
    assert not np.any(got[0][:, ref.resampled_length(700, factor) :])


def test_resampling_down_removes_what_the_lower_rate_cannot_hold():
    # A tone at 0.4 cycles/sample is past the passband of r = 0.5 (0.9 * 0.25):
    # anti-aliased, it is gone; one at 0.1 passes at its level.
    n = np.arange(4000)
    for cycles, kept in ((0.4, False), (0.1, True)):
        record = np.exp(2j * np.pi * cycles * n)[None, :]
        got, _ = run([record], [[("resample", [1, 0.5, 0, 0])]], dtype="complex128")
        middle = got[0, 0, 500:1500]
        level = float(np.sqrt(np.mean(np.abs(middle) ** 2)))
        if kept:
            assert abs(level - 1.0) < 1e-3
        else:
            assert level < 1e-3


def test_a_chain_of_every_transform_matches_the_reference():
    record = signal(2, 900, seed=11)
    steps = [
        ("phase", [1, 0.4, 0, 0]),
        ("frequency_shift", [1, 0.05, 0, 0]),
        ("gain", [1, 0.7, 0, 0]),
        ("time_shift", [1, 123, 1, 0]),
        ("iq_imbalance", [1, 0.5, 0.1, 0]),
        ("invert", [1, 0, 0, 0]),
        ("resample", [1, 1.25, 0, 0]),
        ("frequency_shift", [1, -0.02, 0, 0]),
        ("reverse", [1, 0, 0, 0]),
        ("time_shift", [1, -40, 0, 0]),
        ("phase", [1, -1.0, 0, 0]),
    ]
    for dtype in DTYPES:
        got, _ = run([record], [steps], dtype=dtype)
        assert ref.rms_error(got[0], expected(record, steps), record) < RESAMPLE_TOLERANCE


def test_a_frequency_shift_keeps_its_phase_over_a_long_record():
    # The phasor runs by recurrence between exact anchors: no drift at the end
    # of a 1 Mi-sample record.
    length = 1 << 20
    record = np.ones((1, length), dtype=np.complex128)
    cycles = 0.123456789
    window = ([length - 256], 256)
    got, _ = run([record], [[("frequency_shift", [1, cycles, 0, 0])]], dtype="complex64", window=window)
    n = np.arange(length - 256, length)
    want = np.exp(2j * np.pi * cycles * n)
    assert np.max(np.abs(got[0, 0] - want)) < 1e-5


def test_rows_of_one_batch_each_take_their_own_parameters():
    records = [signal(1, 600, seed=s) for s in range(4)]
    rows_steps = [
        [
            ("phase", [1, 0.1 * k, 0, 0]),
            ("time_shift", [1, 10 * k - 15, k % 2, 0]),
            ("gain", [k % 2, 2.0, 0, 0]),
        ]
        for k in range(4)
    ]
    got, _ = run(records, rows_steps, dtype="complex64", threads=2)
    for k in range(4):
        assert ref.rms_error(got[k], expected(records[k], rows_steps[k]), records[k]) < 1e-5


def test_kinds_are_numbered_as_the_reference_numbers_them():
    from sds_loader.augment.transforms import KINDS

    # The reference's numbering is written out on its own; the Python layer's
    # must be the core's too, or a chain would run other transforms than it names.
    assert _native.AUGMENT_KINDS == ref.KINDS == KINDS
