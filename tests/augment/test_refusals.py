"""What an augmentation chain refuses, and when: hostile parameters when a transform or chain is
made, a transform in physical units over a dataset that gives no sample rate when the reader is
made, each with what is wrong and how to fix it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from augment_factory import FS

from sds_loader import Annotations, BatchReader, Window
from sds_loader.augment import (
    Chain,
    FrequencyShift,
    Gain,
    IQImbalance,
    Noise,
    Phase,
    Resample,
    SampleRate,
    TimeShift,
)

HOSTILE = [
    (lambda: Phase(probability=math.nan), ValueError, "probability must be from 0 to 1"),
    (lambda: Phase(probability=-0.1), ValueError, "probability must be from 0 to 1"),
    (lambda: Phase(probability=1.5), ValueError, "probability must be from 0 to 1"),
    (lambda: Phase(probability=True), TypeError, "probability must be a number"),
    (lambda: Phase(radians=(0, math.inf)), ValueError, "radians must be finite"),
    (lambda: Gain(db=(3, -3)), ValueError, r"db=\(3.0, -3.0\) is empty"),
    (lambda: Gain(db=(1, 2, 3)), ValueError, r"must be a \(low, high\) pair"),
    (lambda: Gain(db="6"), TypeError, "must be a number"),
    (lambda: Noise(snr_db=(math.nan, 10)), ValueError, "snr_db must be finite"),
    (lambda: Noise(snr_db=5, stored_snr=3), TypeError, "stored_snr must be a metadata key"),
    (lambda: Resample(factor=0), ValueError, "a factor of 0 or less has no output"),
    (lambda: Resample(factor=(-1, 2)), ValueError, "must lie from"),
    (lambda: Resample(factor=(0.5, 1e6)), ValueError, "must lie from"),
    (lambda: FrequencyShift(), ValueError, "hz=.* or fraction="),
    (lambda: FrequencyShift(hz=1, fraction=0.1), ValueError, "one of them"),
    (lambda: FrequencyShift(fraction=(-math.inf, 0)), ValueError, "fraction must be finite"),
    (lambda: TimeShift(samples=(0.5, 3)), ValueError, "whole numbers of samples"),
    (lambda: TimeShift(samples=(0, 2**52)), ValueError, r"within \+-2\*\*48"),
    (lambda: TimeShift(samples=(0, 3), circular=1), TypeError, "circular must be True or False"),
    (lambda: IQImbalance(phase_degrees=(math.nan, 1)), ValueError, "phase_degrees must be finite"),
    (lambda: Chain([Phase(), "noise"]), TypeError, "takes sds_loader.augment transforms"),
    (lambda: Chain([Phase()], seed=-1), ValueError, "seed must be an integer"),
    (
        lambda: Chain([Phase()], keep_fraction=math.nan),
        ValueError,
        "keep_fraction must be a number from 0 to 1",
    ),
    (lambda: Chain([Phase()], report=("bandwidth",)), ValueError, "report= takes"),
    (lambda: Chain([Phase()], sample_rate="fs"), TypeError, r"SampleRate.key\('fs'\)"),
    (lambda: Chain([Phase()], sample_rate=0), ValueError, "positive finite number of Hz"),
    (lambda: Chain([Phase()], sample_rate=math.nan), ValueError, "positive finite number of Hz"),
]


@pytest.mark.parametrize("make, error, message", HOSTILE)
def test_hostile_parameters_are_refused_when_made(make, error, message) -> None:
    with pytest.raises(error, match=message):
        make()


def test_a_physical_transform_without_a_sample_rate_is_refused_when_the_reader_is_made(bare: str) -> None:
    for chain in ([FrequencyShift(hz=(-1e3, 1e3))], [TimeShift(seconds=(0, 1e-4))]):
        with pytest.raises(ValueError, match="needs the sample rate") as caught:
            BatchReader(bare, fields=("samples",), augment=chain)
        message = str(caught.value)
        assert "has no Coordinate step and unit" in message
        assert "SampleRate.key(" in message and "Chain(sample_rate=<Hz>)" in message
    BatchReader(bare, fields=("samples",), augment=[Phase()])  # no physical units: no rate needed
    with pytest.raises(ValueError, match=r"Chain\(report=\(\"sample_rate\",\)\) works in physical units"):
        BatchReader(bare, fields=("samples",), augment=Chain([Phase()], report=("sample_rate",)))


def test_a_sample_rate_named_in_metadata_or_given_serves(bare: str) -> None:
    for rate in (SampleRate.key("rate"), FS):
        chain = Chain([FrequencyShift(hz=(-1e3, 1e3))], sample_rate=rate)
        batch = BatchReader(bare, fields=("samples",), augment=chain).read([0, 5])
        np.testing.assert_allclose(
            batch["augment.0.frequency_shift.fraction"] * FS, batch["augment.0.frequency_shift.hz"]
        )
    missing = Chain([FrequencyShift(hz=(-1e3, 1e3))], sample_rate=SampleRate.key("fs"))
    with pytest.raises(ValueError, match="record 0 has no metadata key 'fs'"):
        BatchReader(bare, fields=("samples",), augment=missing)


def test_fractions_and_samples_need_no_sample_rate(bare: str) -> None:
    chain = Chain([FrequencyShift(fraction=(-0.1, 0.1)), TimeShift(samples=(-8, 8))])
    batch = BatchReader(bare, fields=("samples",), augment=chain).read([1, 2])
    assert "augment.0.frequency_shift.hz" not in batch
    assert batch["samples"].shape == (2, 1024)


def test_frequency_labels_without_a_sample_rate_are_refused(bare: str, captures: str) -> None:
    edges = Annotations("bursts", ("edges",), frequencies={"edges": "relative"})
    with pytest.raises(
        ValueError, match=r"Annotations\('bursts', frequencies=...\) takes the sample rate from"
    ):
        BatchReader(
            captures,
            fields=("samples",),
            augment=Chain([Phase()], sample_rate=SampleRate.axis("nope")),
            annotations=[edges],
        )


def test_fields_and_windows_the_chain_cannot_run_on_are_refused(captures: str) -> None:
    with pytest.raises(ValueError, match="names 'label', which the reader does not read"):
        BatchReader(captures, fields=("samples",), augment=Chain([Phase()], fields=("label",)))
    with pytest.raises(ValueError, match="the window runs along 'channel'"):
        BatchReader(captures, fields=("samples",), window=Window("channel", 1), augment=[Phase()])
    with pytest.raises(TypeError, match="augment= takes"):
        BatchReader(captures, augment="phase")  # type: ignore[arg-type]
    reader = BatchReader(captures, fields=("samples",), augment=[Phase()])
    for epoch in (-1, True, 2**64, 1.5):
        with pytest.raises(ValueError, match="epoch must be a non-negative integer"):
            reader.read([0], epoch=epoch)  # type: ignore[arg-type]
