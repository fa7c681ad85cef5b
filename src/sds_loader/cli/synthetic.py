"""Synthetic labelled captures, written with signal_dataset: a dataset to try things on.

Each record is one capture of BPSK, QPSK, 16-QAM or tone-modulated FM, with a
random phase, a small frequency offset and white noise at one of SNR_LEVELS_DB,
stored as a complex64 field "samples" (one "time" axis) with the metadata a
classifier trains on: "label" (the index into MODULATIONS), "modulation" and
"snr_db". Records are seeded by (seed, ordinal), so a dataset is the same on
every machine and any record can be made again alone.

`sds-loader synth PATH` and examples/train_classifier.py both write through
`write_captures`. Real captures compress about as badly as these do (noise
dominates the low bits), so read speeds measured on them carry over.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator

import numpy as np
import signal_dataset as sds

MODULATIONS = ("bpsk", "qpsk", "16qam", "fm")
SNR_LEVELS_DB = (0.0, 5.0, 10.0, 15.0, 20.0)
SAMPLES_PER_SYMBOL = 8
RECORDS_PER_SHARD = 1024


def synthesize(label: int, length: int, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """One capture of modulation `label`, unit signal power plus noise; returns it and its SNR."""
    symbols = -(-length // SAMPLES_PER_SYMBOL)
    name = MODULATIONS[label]
    if name == "bpsk":
        points = rng.choice([-1.0, 1.0], symbols).astype(np.complex128)
    elif name == "qpsk":
        points = np.exp(1j * (np.pi / 4 + np.pi / 2 * rng.integers(0, 4, symbols)))
    elif name == "16qam":
        levels = np.array([-3.0, -1.0, 1.0, 3.0])
        points = (rng.choice(levels, symbols) + 1j * rng.choice(levels, symbols)) / np.sqrt(10)
    else:  # FM by a tone: constant envelope, phase follows the integral of a sine
        t = np.arange(length)
        tone = rng.uniform(0.005, 0.02)
        deviation = rng.uniform(0.05, 0.15)
        signal = np.exp(1j * 2 * np.pi * deviation * np.cumsum(np.sin(2 * np.pi * tone * t)))
    if name != "fm":
        signal = np.repeat(points, SAMPLES_PER_SYMBOL)[:length]
        signal = np.convolve(signal, np.ones(3) / 3, mode="same")  # soften symbol edges
        signal /= np.sqrt(np.mean(np.abs(signal) ** 2))
    offset = rng.uniform(-0.01, 0.01)
    signal = signal * np.exp(1j * (2 * np.pi * offset * np.arange(length) + rng.uniform(0, 2 * np.pi)))
    snr_db = float(rng.choice(SNR_LEVELS_DB))
    noise_power = 10 ** (-snr_db / 10)
    noise = np.sqrt(noise_power / 2) * (rng.standard_normal(length) + 1j * rng.standard_normal(length))
    return (signal + noise).astype(np.complex64), snr_db


def make_record(ordinal: int, length: int, seed: int = 0, *, variable_length: bool = False) -> sds.Record:
    """Record `ordinal`: `length` samples, or with `variable_length` between length/2 and length."""
    rng = np.random.default_rng([seed, ordinal])
    label = int(rng.integers(0, len(MODULATIONS)))
    if variable_length:
        length = int(rng.integers(max(1, length // 2), length + 1))
    samples, snr_db = synthesize(label, length, rng)
    return sds.Record(
        id=f"capture-{ordinal:07d}",
        fields={"samples": sds.Field(samples, axes=(sds.Axis("time", length),))},
        metadata={"label": label, "modulation": MODULATIONS[label], "snr_db": snr_db},
    )


def write_captures(
    root: str,
    records: int,
    length: int,
    seed: int = 0,
    *,
    variable_length: bool = False,
    writer_options: str | None = None,
    per_shard: int = RECORDS_PER_SHARD,
    on_record: Callable[[], object] | None = None,
    make: Callable[..., sds.Record] = make_record,
) -> sds.Dataset:
    """Publish `records` synthetic captures at `root`, in shards of `per_shard`.

    `writer_options` are ArrayRecord's (signal_dataset's default when None).
    The dataset is written beside `root` and renamed into place when complete,
    so an interrupted run leaves no half dataset under that name. `root` must
    not exist yet: a dataset is immutable, and one written over would mix
    shards of two runs.
    """
    if records < 1 or length < 1 or per_shard < 1:
        raise ValueError(
            f"records, length and per_shard must be at least 1, not {records}, {length}, {per_shard}"
        )
    if os.path.lexists(root):
        raise FileExistsError(
            f"{root} already exists; choose a new path, or remove it first to write it again"
        )
    storage = sds.StorageOptions(writer_options=writer_options) if writer_options else None
    building = f"{root.rstrip(os.sep)}.partial-{os.getpid()}"
    shutil.rmtree(building, ignore_errors=True)

    def made(start: int, stop: int) -> Iterator[sds.Record]:
        for ordinal in range(start, stop):
            yield make(ordinal, length, seed, variable_length=variable_length)
            if on_record is not None:
                on_record()

    try:
        shards = [
            sds.write_shard(
                made(start, min(start + per_shard, records)), building, work_id=f"{n:06d}", options=storage
            )
            for n, start in enumerate(range(0, records, per_shard))
        ]
        sds.publish(building, shards, dataset_id="synthetic-captures", snapshot_id="v1")
        os.rename(building, root)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return sds.open(root)
