"""`sds-loader bench --augment`: every row on tiny datasets, once; the hand-written chains'
arithmetic against a float64 reference and against the reader's own chain."""

from __future__ import annotations

from torch_required import torch

import math
import sys

import numpy as np
import pytest
import signal_dataset as sds

from sds_loader import BatchReader
from sds_loader.cli import main
from sds_loader.cli.bench import augment_cost, augment_hand

pytest.importorskip("scipy", reason="scipy (the bench extra) times the resample rows")

THREADS = (1, 2)


def _cells(out: str, header: str) -> list[list[str]]:
    """The body rows of the markdown table whose header starts with `header`."""
    lines = out.splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith(header))
    body = []
    for line in lines[start + 2 :]:
        if not line.startswith("| "):
            break
        body.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return body


def _number(text: str) -> float:
    return float(text.replace(",", "").removesuffix("x"))


def _shown_ratio(shown: float, top: float, bottom: float) -> bool:
    """Whether a ratio shown to two decimals is `top` over `bottom`, rates the table rounds to a
    record a second (a slow row's rounding weighs in its ratios)."""
    low, high = (top - 0.5) / (bottom + 0.5), (top + 0.5) / max(bottom - 0.5, 1e-9)
    return low - 0.0051 <= shown <= high + 0.0051


def test_augment_bench_prints_and_writes_every_row(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(augment_cost, "REPEATS", 1)
    monkeypatch.setattr(augment_cost, "ROUNDS", 1)
    monkeypatch.setattr(augment_cost, "ROUND_SECONDS", 0.0)
    out_dir = tmp_path / "results"
    argv = ["bench", "--augment", "--builtin-records", "32", "--batch-size", "8", "--batches", "2"]
    argv += ["--cache-dir", str(tmp_path / "cache"), "--out", str(out_dir), "--no-progress"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert (out_dir / "augment.md").read_text() in out
    rows = _cells(out, "| records | threads | row |")
    assert {key for key, _, _, _ in augment_cost.ROWS} >= {f"alone_{name}" for name in augment_cost.ALONE}
    labels = {key: label for key, label, _, _ in augment_cost.ROWS}
    single = [key for key, _, _, one in augment_cost.ROWS if one]
    expected = [
        (kind, threads, labels[key])
        for kind in ("8 KiB", "64 KiB")
        for threads in THREADS
        for key in labels
        if threads == 1 or key not in single
    ]
    assert [(row[0], int(row[1]), row[2]) for row in rows] == expected
    rates = {}
    for kind, threads, label, rate, ratio, added, spread, each in rows:
        # One repeat: the median is that repeat, the ratio its rate over the plain read's, and
        # the microseconds a record added the difference of their times a record.
        assert _number(rate) > 0 and spread == "-" and each == rate
        rates[kind, int(threads), label] = _number(rate)
        plain = rates[kind, int(threads), labels["plain"]]
        assert _shown_ratio(_number(ratio), _number(rate), plain)
        # The table rounds rates to a record a second and microseconds to a tenth.
        shown, slack = _number(rate), 0.051 + 0.5e6 / _number(rate) ** 2 + 0.5e6 / plain**2
        assert abs(_number(added) - (1e6 / shown - 1e6 / plain)) <= slack
    compared = {label: _number(median) for label, median, _ in _cells(out, "| comparison |")}
    for kind in ("8 KiB", "64 KiB"):
        for threads in THREADS:
            at = f"{kind}, {threads} thread{'s' * (threads != 1)}"
            for over, key in (("torch over the batch", "torch"), ("numpy record by record", "numpy")):
                found = compared[f"{at}: the chain inside the read over {over}"]
                assert _shown_ratio(
                    found, rates[kind, threads, labels["reader"]], rates[kind, threads, labels[key]]
                )
        resample = compared[f"{kind}, 1 thread: resample inside the read over resample_poly"]
        assert _shown_ratio(
            resample, rates[kind, 1, labels["alone_resample"]], rates[kind, 1, labels["scipy_resample"]]
        )
        scaled = compared[f"{kind}: the plain read at 2 threads over 1"]
        assert _shown_ratio(scaled, rates[kind, 2, labels["plain"]], rates[kind, 1, labels["plain"]])
    assert "32 records of 1024 complex64 (8 KiB), zstd" in out
    assert main(argv) != 0
    assert "augment.md holds an earlier run's rows" in capsys.readouterr().err


def test_augment_bench_refuses_a_path(capsys, tmp_path) -> None:
    argv = ["bench", str(tmp_path), "--augment", "--no-progress", "--out", str(tmp_path / "o")]
    assert main(argv) != 0
    assert "--augment times the chain on its own built-in datasets; leave out PATH" in capsys.readouterr().err


def _reference(x: np.ndarray, draws: augment_hand.Draws) -> np.ndarray:
    """The chain without its noise, in float64: rotate, turn by the offset, then move, zeros entering."""
    length = x.shape[-1]
    n = np.arange(length)
    y = np.zeros(x.shape, dtype=np.complex128)
    for row in range(x.shape[0]):
        turned = x[row].astype(np.complex128) * np.exp(
            1j * (draws.radians[row] + 2 * np.pi * draws.cycles[row] * n)
        )
        s = int(draws.shift[row])
        source = n - s
        inside = (source >= 0) & (source < length)
        y[row][..., inside] = turned[..., source[inside]]
    return y


@pytest.mark.parametrize("shape", [(6, 1024), (3, 2, 512)])
def test_the_hand_written_chains_do_the_chains_arithmetic(shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
    draws = augment_hand.Draws.draw(rng, shape[0])
    # Shifts of both signs, and past the record's end: every sample zero.
    draws.shift[:3] = (-40, 0, shape[-1] + 3)
    quiet = augment_hand.Draws(draws.radians, draws.cycles, draws.shift, np.zeros(shape[0]))
    want = _reference(x, quiet)
    by_record = augment_hand.chain_records(x, quiet, rng)
    by_batch = augment_hand.chain_batch(torch.from_numpy(x), quiet).numpy()
    assert by_record.dtype == by_batch.dtype == np.complex64
    assert not np.any(by_record[2]) and np.any(by_record[0])
    np.testing.assert_allclose(by_record, want, atol=2e-5 * math.sqrt(2))
    np.testing.assert_allclose(by_batch, want, atol=5e-4)
    # The noise: its power the drawn fraction of the row's power after the shift, within 5% over
    # 4,096 complex samples a row (each estimate's standard deviation is 1.6%).
    long = (rng.standard_normal((4, 4096)) + 1j * rng.standard_normal((4, 4096))).astype(np.complex64)
    noisy = augment_hand.Draws.draw(rng, 4)
    noisy.shift[:] = 0
    quiet = augment_hand.Draws(noisy.radians, noisy.cycles, noisy.shift, np.zeros(4))
    clean = _reference(long, quiet)
    power = np.mean(np.abs(clean) ** 2, axis=-1)
    for made in (
        augment_hand.chain_records(long, noisy, rng),
        augment_hand.chain_batch(torch.from_numpy(long), noisy, torch.Generator().manual_seed(3)).numpy(),
    ):
        added = np.mean(np.abs(made - clean) ** 2, axis=-1)
        np.testing.assert_allclose(added / power, noisy.noise_fraction, rtol=0.05)


def test_resample_records_is_resample_poly_cut_to_the_record(tmp_path) -> None:
    from scipy.signal import resample_poly

    rng = np.random.default_rng(1)
    x = (rng.standard_normal((3, 2, 500)) + 1j * rng.standard_normal((3, 2, 500))).astype(np.complex64)
    down = augment_hand.resample_records(x, 4, 5)
    up = augment_hand.resample_records(x, 5, 4)
    assert down.shape == up.shape == x.shape
    np.testing.assert_array_equal(down[..., 400:], 0)
    np.testing.assert_allclose(down[..., :400], resample_poly(x, 4, 5, axis=-1), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(up, resample_poly(x, 5, 4, axis=-1)[..., :500], rtol=1e-6, atol=1e-6)


def _drawn(batch: dict[str, np.ndarray], position: int, name: str, parameter: str) -> np.ndarray:
    return batch[f"augment.{position}.{name}.{parameter}"]


def test_the_hand_written_chain_is_the_readers_chain(tmp_path) -> None:
    """Given the parameters the reader drew, the baselines compute the rows the reader returned:
    the bench compares the same work."""
    root = augment_cost.ensure_frames(24, str(tmp_path))
    reader = BatchReader(root, fields=("samples",), augment=augment_cost.reader_chain(seed=5))
    plain = BatchReader(root, fields=("samples",))
    ordinals = np.arange(0, 24, 2)
    batch = reader.read(ordinals, epoch=1)
    stored = plain.read(ordinals)["samples"]
    draws = augment_hand.Draws(
        radians=_drawn(batch, 0, "phase", "radians"),
        cycles=_drawn(batch, 1, "frequency_shift", "hz") / augment_cost.SAMPLE_RATE,
        shift=_drawn(batch, 2, "time_shift", "samples").astype(np.int64),
        noise_fraction=np.zeros(len(ordinals)),
    )
    for position, name in enumerate(("phase", "frequency_shift", "time_shift", "noise")):
        assert _drawn(batch, position, name, "applied").all()
    clean = augment_hand.chain_records(stored, draws, np.random.default_rng(0))
    residual = batch["samples"].astype(np.complex128) - clean
    added = np.mean(np.abs(residual) ** 2, axis=-1)
    # What is left is the reader's noise: the power it reports, within 15% over 1,024 samples.
    np.testing.assert_allclose(added, _drawn(batch, 3, "noise", "sigma2"), rtol=0.15)
    snr = _drawn(batch, 3, "noise", "snr_db")
    assert ((snr >= augment_hand.SNR_DB[0]) & (snr <= augment_hand.SNR_DB[1])).all()
    power = np.mean(np.abs(clean) ** 2, axis=-1)
    np.testing.assert_allclose(_drawn(batch, 3, "noise", "sigma2"), power * 10 ** (-snr / 10), rtol=1e-3)
    # And it is the records the bench timed: 8 KiB of complex64.
    spec = sds.open(root).record_metadata[0].fields["samples"]
    assert np.dtype(spec.dtype) == np.complex64 and tuple(spec.shape) == (augment_cost.FRAME_SAMPLES,)


def test_augment_bench_says_what_it_needs_where_torch_is_missing(capsys, tmp_path, monkeypatch) -> None:
    # A module set to None in sys.modules is one Python's import system will not find.
    monkeypatch.setitem(sys.modules, "torch", None)
    argv = ["bench", "--augment", "--no-progress", "--out", str(tmp_path / "o"), "--cache-dir", str(tmp_path)]
    assert main(argv) == 2
    assert "torch is not installed: pip install 'sds-loader[torch,bench]'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
