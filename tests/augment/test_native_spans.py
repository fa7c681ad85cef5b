"""Windows computed on the span they need, as if the chain ran on the whole record.

A window of the final record (inside it, across either end, wholly outside)
through every time transform and combinations of them: the core asks for the
span of the original record augment_spans names, reads only that (samples
outside the record stand as garbage in the buffer and must read as zero), and
returns what the reference's whole record, cut, holds. The span is what the
window needs, not the record: a short window of a long capture costs the
window.
"""

from __future__ import annotations

import augment_reference as ref
import numpy as np
import pytest
from augment_native import expected, kinds_of, params_of, run, signal
from native_required import _native

LENGTH = 1000
# (start, length) of windows: inside, across the start, across the end, past
# either end, longer than the record.
WINDOWS = [
    (0, LENGTH),
    (100, 256),
    (-50, 200),
    (LENGTH - 100, 300),
    (LENGTH + 10, 64),
    (-300, 100),
    (-20, LENGTH + 40),
]

CHAINS = {
    "pointwise": [("phase", [1, 0.3, 0, 0]), ("frequency_shift", [1, 0.021, 0, 0]), ("gain", [1, 2.0, 0, 0])],
    "shift zero": [("frequency_shift", [1, 0.05, 0, 0]), ("time_shift", [1, 73, 0, 0])],
    "shift zero left": [("time_shift", [1, -173, 0, 0]), ("frequency_shift", [1, 0.05, 0, 0])],
    "shift circular": [("frequency_shift", [1, 0.05, 0, 0]), ("time_shift", [1, 420, 1, 0])],
    "shift circular left": [("time_shift", [1, -911, 1, 0]), ("phase", [1, 1.0, 0, 0])],
    "reverse": [("frequency_shift", [1, 0.03, 0, 0]), ("reverse", [1, 0, 0, 0])],
    "resample up": [("frequency_shift", [1, 0.03, 0, 0]), ("resample", [1, 1.6, 0, 0])],
    "resample down": [("resample", [1, 0.45, 0, 0]), ("frequency_shift", [1, 0.03, 0, 0])],
    "shift then reverse then shift": [
        ("time_shift", [1, 300, 1, 0]),
        ("reverse", [1, 0, 0, 0]),
        ("time_shift", [1, -60, 0, 0]),
    ],
    "resample between shifts": [
        ("time_shift", [1, 250, 1, 0]),
        ("resample", [1, 1.3, 0, 0]),
        ("time_shift", [1, -500, 1, 0]),
        ("reverse", [1, 0, 0, 0]),
    ],
    "invert and imbalance around a shift": [
        ("invert", [1, 0, 0, 0]),
        ("time_shift", [1, 10, 1, 0]),
        ("iq_imbalance", [1, 1.0, 0.2, 0]),
    ],
}


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_every_window_is_the_whole_records_result_cut(name):
    steps = CHAINS[name]
    record = signal(2, LENGTH, seed=1)
    full = ref.apply(record, steps)
    for dtype in ("complex64", "pairs", "complex128"):
        for start, length in WINDOWS:
            got, _ = run([record], [steps], dtype=dtype, window=([start], length))
            want = ref.cut(full, start, length)
            assert ref.rms_error(got[0], want, record) < 1e-5, (dtype, start, length)


def test_rows_of_one_batch_take_their_own_windows_and_lengths():
    records = [signal(1, n, seed=n) for n in (250, 500, 750, 400)]
    rows_steps = [
        [
            ("time_shift", [1, 90 * k - 100, k % 2, 0]),
            ("resample", [1, 0.8 + 0.2 * k, 0, 0]),
            ("reverse", [k % 2, 0, 0, 0]),
        ]
        for k in range(4)
    ]
    starts = [-30, 200, 700, 300]
    got, _ = run(records, rows_steps, window=(starts, 128), threads=2)
    for k in range(4):
        want = expected(records[k], rows_steps[k], (starts[k], 128))
        assert ref.rms_error(got[k], want, records[k]) < 1e-5


def spans(steps, start, length, record_length):
    src_start, src_length, final = _native.augment_spans(
        kinds_of(steps), params_of([steps]), np.array([start]), length, np.array([record_length])
    )
    return int(src_start[0]), int(src_length[0]), int(final[0])


def test_a_short_window_of_a_long_capture_reads_only_its_span():
    capture = 1 << 20
    chain = [
        ("phase", [1, 0.3, 0, 0]),
        ("frequency_shift", [1, 0.01, 0, 0]),
        ("time_shift", [1, 64, 0, 0]),
        ("noise", [1, 10.0, float("nan"), 0]),
    ]
    # The time shift folds into the window's start.
    assert spans(chain, 500_000, 4096, capture) == (500_000 - 64, 4096, capture)
    # A circular shift that does not wrap the window reads its span alone...
    assert spans([("time_shift", [1, -1000, 1, 0])], 0, 4096, capture) == (1000, 4096, capture)
    # ... and one whose window wraps round the end needs the record.
    assert spans([("time_shift", [1, 1000, 1, 0])], 0, 4096, capture) == (0, capture, capture)
    # Reversal reads the mirrored span.
    assert spans([("reverse", [1, 0, 0, 0])], 10, 100, capture) == (capture - 110, 100, capture)
    # Resampling reads the window's inputs and the kernel's reach each side.
    start, length, final = spans([("resample", [1, 2.0, 0, 0])], 2_000_000, 4096, capture)
    half_width = ref.RESAMPLE_ZERO_CROSSINGS / ref.RESAMPLE_PASSBAND
    assert final == 2 * capture
    assert start <= 1_000_000 - int(half_width) and start + length >= 1_000_000 + 2048 + int(half_width)
    assert length < 2048 + 2 * half_width + 4
    start, length, _ = spans([("resample", [1, 0.5, 0, 0])], 1000, 4096, capture)
    assert length < 8192 + 2 * half_width / 0.5 + 4
    # A window wholly past the record needs nothing of it.
    assert spans([("time_shift", [1, 5, 0, 0]), ("reverse", [1, 0, 0, 0])], capture + 5, 100, capture)[1] == 0


def test_the_reader_may_leave_outside_the_record_what_it_likes():
    # The span may reach outside the record; the buffer's samples there are
    # garbage (run() fills them with 1e6) and read as zero.
    record = signal(1, 300, seed=2)
    steps = [("phase", [1, 0.5, 0, 0])]
    got, _ = run([record], [steps], window=([-100], 500), garbage=np.float32(np.nan))
    want = expected(record, steps, (-100, 500))
    assert np.all(np.isfinite(got)) and ref.rms_error(got[0], want, record) < 1e-5


def test_outside_the_record_a_window_stays_zero_whatever_the_chain_multiplies_by():
    # Three gains of 1e15 overflow complex64 inside the record; outside it
    # there is nothing to multiply (0 * inf would be NaN).
    record = signal(1, 200, seed=3)
    steps = [("gain", [1, 1e15, 0, 0]), ("iq_imbalance", [1, 300.0, 0.1, 0]), ("gain", [1, 1e15, 0, 0])]
    got, _ = run([record], [steps], window=([-100], 400))
    assert not np.any(got[0, :, :100]) and not np.any(got[0, :, 300:])
    assert np.all(np.isinf(got[0, :, 100:300].real) | np.isnan(got[0, :, 100:300].real))
