"""The native augmentation core refuses what it cannot run, naming the row, the transform and the fix.

Python refuses bad chains when they are made; the core checks again every
value and size it is given, so that nothing reaches a kernel unchecked:
non-finite and out-of-domain parameters, unknown kinds, shapes that disagree,
a source too short for the span its row needs, buffers that overlap.
"""

from __future__ import annotations

import numpy as np
import pytest
from augment_native import kinds_of, params_of, run, signal
from native_required import _native

NAN = float("nan")
INF = float("inf")


def apply(
    kinds,
    params,
    source,
    out,
    *,
    ordinals=None,
    src_start=None,
    lengths=None,
    out_start=None,
    threads=1,
    seed=0,
):
    rows = params.shape[0]
    _native.augment_apply(
        kinds,
        params,
        seed,
        0,
        np.arange(rows) if ordinals is None else ordinals,
        source,
        np.zeros(rows, dtype=np.int64) if src_start is None else src_start,
        np.full(rows, source.shape[2], dtype=np.int64) if lengths is None else lengths,
        out,
        np.zeros(rows, dtype=np.int64) if out_start is None else out_start,
        threads,
    )


def one_row(name, values):
    steps = [("phase", [1, 0.1, 0, 0]), (name, values)]
    source = np.ones((2, 1, 64), dtype=np.complex64)
    return kinds_of(steps), params_of([[steps[0], (name, [0, 0, 0, 0])], steps]), source


BAD = [
    ("phase", [1, NAN, 0, 0], "the phase (radians) is nan"),
    ("phase", [1, INF, 0, 0], "the phase (radians) is inf"),
    ("frequency_shift", [1, -INF, 0, 0], "the shift (cycles per sample) is -inf"),
    ("frequency_shift", [1, 2.0**21, 0, 0], "within +-2^20"),
    ("gain", [1, NAN, 0, 0], "amplitude"),
    ("gain", [1, -1.0, 0, 0], "negative"),
    ("gain", [1, 1e16, 0, 0], "[0, 1e15] (300 dB)"),
    ("time_shift", [1, 1.5, 0, 0], "whole number"),
    ("time_shift", [1, NAN, 0, 0], "shift"),
    ("time_shift", [1, 2.0**60, 0, 0], "whole number"),
    ("time_shift", [1, 3, 2, 0], "0 (zero fill) or 1 (circular)"),
    ("noise", [1, NAN, NAN, 0], "target SNR"),
    ("noise", [1, INF, NAN, 0], "target SNR"),
    ("noise", [1, 10, INF, 0], "stored SNR"),
    ("noise", [1, -301, NAN, 0], "+-300 dB"),
    ("noise", [1, 10, 1e4, 0], "+-300 dB"),
    ("iq_imbalance", [1, NAN, 0, 0], "amplitude (dB)"),
    ("iq_imbalance", [1, 400, 0, 0], "+-300 dB"),
    ("iq_imbalance", [1, 0, INF, 0], "phase (radians)"),
    ("resample", [1, 0.0, 0, 0], "[1/1024, 1024]"),
    ("resample", [1, -2.0, 0, 0], "[1/1024, 1024]"),
    ("resample", [1, NAN, 0, 0], "factor"),
    ("resample", [1, INF, 0, 0], "factor"),
    ("resample", [1, 1e-9, 0, 0], "[1/1024, 1024]"),
    ("resample", [1, 4096.0, 0, 0], "[1/1024, 1024]"),
    ("invert", [0.5, 0, 0, 0], "applied flag"),
    ("reverse", [NAN, 0, 0, 0], "applied flag"),
]


@pytest.mark.parametrize(("name", "values", "says"), BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_a_bad_parameter_is_refused_naming_row_and_transform(name, values, says):
    kinds, params, source = one_row(name, values)
    out = np.zeros_like(source)
    with pytest.raises(ValueError, match=r"row 1, transform 1 \(" + name + r"\).*" + r"(?s:.*)") as raised:
        apply(kinds, params, source, out)
    assert says in str(raised.value)
    # augment_spans checks the same.
    with pytest.raises(ValueError, match="row 1, transform 1"):
        _native.augment_spans(kinds, params, np.zeros(2, dtype=np.int64), 64, np.full(2, 64))
    assert not np.any(out)  # nothing ran


def test_a_step_a_row_skips_may_hold_anything():
    steps = [("resample", [0, NAN, INF, -1]), ("phase", [1, 0.5, 0, 0])]
    record = signal(1, 100)
    got, params = run([record], [steps])
    assert np.all(np.isfinite(got)) and np.isnan(params[0, 0, 1])


@pytest.mark.parametrize("kind", [0, 10, -1, 2**31 - 1])
def test_an_unknown_kind_is_refused(kind):
    params = np.zeros((1, 1, 4))
    with pytest.raises(ValueError, match="kinds are 1..9"):
        _native.augment_spans(
            np.array([kind], dtype=np.int32), params, np.zeros(1, dtype=np.int64), 8, np.array([8])
        )


def test_shapes_that_disagree_are_refused():
    kinds = np.array([1], dtype=np.int32)
    params = np.zeros((2, 1, 4))
    source = np.zeros((2, 1, 8), dtype=np.complex64)
    out = np.zeros((2, 1, 8), dtype=np.complex64)
    with pytest.raises(ValueError, match=r"params must be a float64 array of shape \(rows, 1, 4\)"):
        apply(kinds, np.zeros((2, 2, 4)), source, out)
    with pytest.raises(ValueError, match=r"params must be a float64 array of shape"):
        apply(kinds, np.zeros((2, 1, 3)), source, out)
    with pytest.raises(ValueError, match="one row count"):
        apply(kinds, params, source[:1], out[:1])
    with pytest.raises(ValueError, match="one channel count"):
        apply(kinds, params, source, np.zeros((2, 2, 8), dtype=np.complex64))
    with pytest.raises(ValueError, match="ordinals must be a 1-D int64 array of one value per row"):
        apply(kinds, params, source, out, ordinals=np.arange(3))
    with pytest.raises(ValueError, match="out_start must be"):
        _native.augment_spans(kinds, params, np.zeros(3, dtype=np.int64), 8, np.full(2, 8))
    with pytest.raises(ValueError, match="one dtype"):
        apply(kinds, params, source, out.astype(np.complex128))
    with pytest.raises(ValueError, match="complex64 or complex128, or .*float32 IQ pairs"):
        apply(kinds, params, source.real.copy(), out)
    with pytest.raises(ValueError, match="float32 IQ pairs"):
        apply(kinds, params, np.zeros((2, 1, 8, 3), np.float32), np.zeros((2, 1, 8, 3), np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        apply(kinds, params, np.zeros((2, 1, 16), dtype=np.complex64)[:, :, ::2], out)
    with pytest.raises(ValueError, match="writable, C-contiguous float64"):
        apply(kinds, params.astype(np.float32), source, out)
    frozen = params.copy()
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="writable, C-contiguous float64"):
        apply(kinds, frozen, source, out)
    locked = out.copy()
    locked.flags.writeable = False
    with pytest.raises(ValueError, match="out must be writable"):
        apply(kinds, params, source, locked)


def test_a_source_too_short_for_its_span_is_refused():
    steps = [("time_shift", [1, 10, 0, 0])]
    kinds, params = kinds_of(steps), params_of([steps])
    source = np.zeros((1, 1, 50), dtype=np.complex64)
    out = np.zeros((1, 1, 100), dtype=np.complex64)
    with pytest.raises(
        ValueError, match=r"row 0 needs samples \[0, 90\) of its record, but its source holds \[0, 50\)"
    ):
        apply(kinds, params, source, out, lengths=np.array([100]))
    with pytest.raises(ValueError, match="read the span augment_spans gives"):
        apply(kinds, params, source, out, lengths=np.array([100]), src_start=np.array([5]))


def test_lengths_windows_and_threads_out_of_range_are_refused():
    kinds = np.array([1], dtype=np.int32)
    params = np.zeros((1, 1, 4))
    source = np.zeros((1, 1, 8), dtype=np.complex64)
    out = np.zeros((1, 1, 8), dtype=np.complex64)
    with pytest.raises(ValueError, match=r"record length of -1; it must lie in \[0, 2\^48\]"):
        apply(kinds, params, source, out, lengths=np.array([-1]))
    with pytest.raises(ValueError, match="record length"):
        apply(kinds, params, source, out, lengths=np.array([2**62]))
    with pytest.raises(ValueError, match="window start"):
        apply(kinds, params, source, out, out_start=np.array([-(2**60)]))
    with pytest.raises(ValueError, match="a window of -1 samples"):
        _native.augment_spans(kinds, params, np.zeros(1, dtype=np.int64), -1, np.array([8]))
    with pytest.raises(ValueError, match="threads"):
        apply(kinds, params, source, out, threads=-1)
    grow = [("resample", [1, 1000.0, 0, 0])] * 6
    with pytest.raises(ValueError, match="grow past 2\\^48"):
        _native.augment_spans(
            kinds_of(grow), params_of([grow]), np.zeros(1, dtype=np.int64), 8, np.array([1000])
        )


def test_seeds_epochs_and_positions_out_of_range_are_refused():
    with pytest.raises(ValueError, match=r"seed must be an int in \[0, 2\*\*64\)"):
        _native.augment_draw(-1, 0, np.arange(2), 0, 1)
    with pytest.raises(ValueError, match="epoch must be"):
        _native.augment_draw(0, 2**64, np.arange(2), 0, 1)
    with pytest.raises(ValueError, match="position"):
        _native.augment_draw(0, 0, np.arange(2), 2**32, 1)
    with pytest.raises(ValueError, match="count"):
        _native.augment_draw(0, 0, np.arange(2), 0, -1)
    with pytest.raises(ValueError, match="seed must be"):
        apply(
            np.array([1], np.int32),
            np.zeros((1, 1, 4)),
            np.zeros((1, 1, 4), np.complex64),
            np.zeros((1, 1, 4), np.complex64),
            seed=-5,
        )


def test_source_and_out_share_memory_only_as_one_buffer_run_in_place():
    kinds = np.array([1, 5], dtype=np.int32)  # phase, then noise
    params = np.array([[[1.0, 0.5, 0, 0], [1.0, 10.0, np.nan, 0]]] * 2)
    rng = np.random.default_rng(3)
    record = (rng.normal(size=(2, 1, 64)) + 1j * rng.normal(size=(2, 1, 64))).astype(np.complex64)
    apart = np.zeros_like(record)
    apply(kinds, params.copy(), record, apart)
    in_place = record.copy()
    apply(kinds, params.copy(), in_place, in_place)
    assert in_place.tobytes() == apart.tobytes()
    # A view that overlaps without being the same rows is refused.
    buffer = np.zeros((1, 1, 16), dtype=np.complex64)
    with pytest.raises(ValueError, match="must not share memory"):
        apply(np.array([1], np.int32), np.zeros((1, 1, 4)), buffer[:, :, :8], buffer[:, :, 4:12])
    # In place, a row's source must be its window.
    with pytest.raises(ValueError, match="runs in place"):
        apply(
            np.array([1], np.int32),
            np.array([[[1.0, 0.5, 0, 0]]]),
            buffer,
            buffer,
            src_start=np.array([0]),
            out_start=np.array([3]),
        )


def test_held_positions_stand_for_a_records_end_only_under_a_chain_that_keeps_samples_in_place():
    rows = np.zeros((1, 1, 8), dtype=np.complex64)
    one = np.zeros(1, dtype=np.int64)
    for kind, refused in (("phase", False), ("time_shift", True), ("reverse", True), ("resample", True)):
        kinds = np.array([_native.AUGMENT_KINDS[kind]], dtype=np.int32)
        params = np.array([[[0.0, 1.0, 0.0, 0.0]]])
        made = lambda: _native.AugmentRows(  # noqa: E731
            kinds, 0, 0, one, one, np.full(1, 8), one, [(rows, rows, params, 0)], held=np.full(1, 5)
        )
        if refused:
            with pytest.raises(ValueError, match=f"step 0 is a {kind}"):
                made()
        else:
            made().finish_rest(1)
    with pytest.raises(ValueError, match="held must be a C-contiguous int64 array"):
        _native.AugmentRows(
            np.array([1], np.int32),
            0,
            0,
            one,
            one,
            np.full(1, 8),
            one,
            [(rows, rows, np.zeros((1, 1, 4)), 0)],
            held=np.full(2, 5),
        )
