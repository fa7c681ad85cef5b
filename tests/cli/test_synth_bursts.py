"""`sds-loader synth --bursts` and `sds-loader bench --annotations`."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import signal_dataset as sds

from sds_loader import Annotations, BatchReader, Window
from sds_loader.cli import main

RECORDS = 24
LENGTH = 2048


@pytest.fixture(scope="module")
def bursts(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = os.fspath(tmp_path_factory.mktemp("bursts") / "bursts.sds")
    assert (
        main(["synth", root, "--bursts", "--records", str(RECORDS), "--length", str(LENGTH), "--no-progress"])
        == 0
    )
    return root


def test_the_set_says_where_the_bursts_are(bursts: str) -> None:
    dataset = sds.open(bursts)
    rows = dataset.annotations["bursts"]
    assert len(rows) == RECORDS and dict(rows.metadata) == {"positions": {"intervals": "time"}}
    inside: list[float] = []
    outside: list[float] = []
    counts = set()
    for ordinal in range(RECORDS):
        row = rows[ordinal]
        assert row.status.value == "success" and row.values["bursts"] == len(row.fields["intervals"].data)
        intervals = row.fields["intervals"].data
        assert intervals.dtype == np.int64 and row.fields["freq"].data.shape == intervals.shape
        assert (
            (intervals[:, 0] < intervals[:, 1]) & (intervals[:, 0] >= 0) & (intervals[:, 1] <= LENGTH)
        ).all()
        counts.add(len(intervals))
        power = np.abs(dataset[ordinal]["samples"].data) ** 2
        mask = np.zeros(LENGTH, dtype=bool)
        for start, stop in intervals.tolist():
            mask[start:stop] = True
        if mask.any():
            inside.append(float(power[mask].mean()))
        if (~mask).any():
            outside.append(float(power[~mask].mean()))
    assert len(counts) >= 3  # rows of several sizes, empty ones among them likely
    assert min(inside) > 10 * max(outside)  # the bursts are where the set says


def test_windows_read_the_set_natively(bursts: str) -> None:
    reader = BatchReader(
        bursts,
        fields=("samples",),
        targets=("modulation",),
        window=Window("time", 512),
        annotations=[Annotations("bursts", ("intervals",), positions={"intervals": "time"})],
    )
    batch = reader.read(range(RECORDS), starts=[100] * RECORDS)
    assert batch["bursts.offsets"][-1] == batch["bursts.intervals"].shape[0]
    assert ((batch["bursts.intervals"] >= 0) & (batch["bursts.intervals"] <= 512)).all()
    assert set(reader.labels["modulation"]) <= {"bpsk", "qpsk", "16qam", "fm"}


def test_bursts_are_of_one_length(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = os.fspath(tmp_path / "b.sds")
    assert main(["synth", root, "--bursts", "--variable-length", "--records", "2", "--no-progress"]) == 2
    assert "drop --variable-length" in capsys.readouterr().err


def test_bench_annotations_compares_against_signal_dataset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "bench",
            "--annotations",
            "--cache-dir",
            os.fspath(tmp_path),
            "--builtin-records",
            "64",
            "--batch-size",
            "16",
            "--batches",
            "2",
            "--no-progress",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "signal_dataset AnnotationSet[i], per row" in out and "less than signal_dataset's row" in out
    assert os.path.isdir(tmp_path / "bursts-v1-64x4096")
