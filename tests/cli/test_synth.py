"""`sds-loader synth`: a labelled dataset signal_dataset reads back, as asked for."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest
import signal_dataset as sds

import sds_loader
from sds_loader.cli import main, native_tools, progress, synthetic
from sds_loader.cli.dataset_shards import shard_files

RECORDS = 48
LENGTH = 96


def synth(tmp_path, *extra: str) -> str:
    root = os.fspath(tmp_path / "captures.sds")
    assert (
        main(["synth", root, "--records", str(RECORDS), "--length", str(LENGTH), "--no-progress", *extra])
        == 0
    )
    return root


def test_writes_labelled_captures_that_read_back_byte_for_byte(tmp_path, capsys):
    root = synth(tmp_path)
    assert f"wrote {RECORDS} captures of {LENGTH} complex64 samples to {root}" in capsys.readouterr().out
    dataset = sds.open(root)
    assert len(dataset) == RECORDS
    records = [dataset[i] for i in range(RECORDS)]
    labels = {record.metadata["label"] for record in records}
    assert labels == set(range(len(synthetic.MODULATIONS)))
    for record in records:
        assert record.metadata["modulation"] == synthetic.MODULATIONS[record.metadata["label"]]
        assert record.metadata["snr_db"] in synthetic.SNR_LEVELS_DB
        samples = record["samples"].data
        assert samples.dtype == np.complex64 and samples.shape == (LENGTH,)
        assert np.isfinite(samples).all()
    assert len({record.metadata["snr_db"] for record in records}) > 1
    batch = sds_loader.BatchReader(root, fields=("samples",), targets=("label",)).read(range(RECORDS))
    for k, record in enumerate(records):
        assert batch["samples"][k].tobytes() == record["samples"].data.tobytes()
        assert batch["label"][k] == record.metadata["label"]


def test_the_same_seed_writes_the_same_records(tmp_path):
    first = sds.open(synth(tmp_path / "a"))
    second = sds.open(synth(tmp_path / "b"))
    other = sds.open(synth(tmp_path / "c", "--seed", "1"))
    assert first[5]["samples"].data.tobytes() == second[5]["samples"].data.tobytes()
    assert first[5]["samples"].data.tobytes() != other[5]["samples"].data.tobytes()


def test_variable_length(tmp_path):
    dataset = sds.open(synth(tmp_path, "--variable-length"))
    lengths = {dataset[i]["samples"].data.shape[0] for i in range(RECORDS)}
    assert len(lengths) > 1
    assert all(LENGTH // 2 <= length <= LENGTH for length in lengths)


@pytest.mark.skipif(
    native_tools.unavailable_reason("shard_summary") is not None, reason="needs the native shard tools"
)
def test_writer_options_reach_the_writer(tmp_path):
    root = synth(tmp_path, "--writer-options", "group_size:1,uncompressed")
    summarize = native_tools.function("shard_summary")
    shards = shard_files(sds.open(root))
    assert {summarize(shard.path)["compression"] for shard in shards} == {"none"}


def test_an_existing_path_is_refused_and_left_alone(tmp_path, capsys):
    root = synth(tmp_path)
    before = sorted(os.listdir(root))
    capsys.readouterr()
    assert main(["synth", root, "--records", "4", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"sds-loader synth: error: {root} already exists")
    assert sorted(os.listdir(root)) == before and len(sds.open(root)) == RECORDS
    assert os.listdir(tmp_path) == ["captures.sds"]  # no partial sibling left behind


def test_progress_in_a_log_is_whole_lines(monkeypatch):
    log = io.StringIO()  # not a terminal
    monkeypatch.setattr(progress, "LOG_INTERVAL", 0.0)
    with progress.progress(3, "writing x", file=log) as bar:
        for _ in range(3):
            bar.update(1)
    lines = log.getvalue().splitlines(keepends=True)
    assert "\r" not in log.getvalue() and all(line.endswith("\n") for line in lines)
    assert lines[0].startswith("writing x: 1 rec of 3 rec (33%)")
    assert lines[-1].startswith("writing x: done, 3 rec in ")
