"""What `sds-loader bench` does around the timing: where it writes, what it refuses, what it prints.

No speed is asserted here (tests/cli/test_cli.py checks the rows themselves).
"""

from __future__ import annotations

import json
import os
import time
from functools import partial

import numpy as np
import pytest
import sds_factory

from sds_loader.cli import main, progress
from sds_loader.cli.bench import builtin, report, timing
from sds_loader.cli.bench.plan import Plan
from sds_loader.cli.bench.run import results_dir

RECORDS = 24


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("bench") / "ds"
    sds_factory.write_dataset(path, RECORDS, partial(sds_factory.capture, samples=64), records_per_shard=8)
    return os.fspath(path)


@pytest.mark.parametrize(
    ("options", "largest"),
    [
        (["--batch-size", str(RECORDS + 1)], f"--batch-size {RECORDS}"),
        (["--batch-size", "8", "--batches", "4"], "--batches 3 at this batch size"),
        (["--batch-size", "5", "--batches", "5"], "--batches 4 at this batch size"),
    ],
)
def test_a_pass_that_would_read_a_record_twice_is_refused(capsys, root, tmp_path, options, largest):
    out = tmp_path / "out"
    assert main(["bench", root, *options, "--out", os.fspath(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "read records twice" in err and f"the largest is {largest}" in err
    assert not out.exists()


def test_earlier_results_are_never_overwritten(capsys, root, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "bench.json").write_text("{}")
    assert main(["bench", root, "--out", os.fspath(out), "--batch-size", "8", "--no-progress"]) == 2
    assert "already holds results of an earlier run (bench.json)" in capsys.readouterr().err
    assert (out / "bench.json").read_text() == "{}"


def test_each_run_without_out_gets_a_new_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = results_dir(None)
    os.makedirs(first)
    second = results_dir(None)
    assert os.path.dirname(first) == os.path.dirname(second) == "bench-results"
    assert second != first and not os.path.exists(second)


def test_cache_dir_option_beats_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(builtin.CACHE_DIR_ENV, os.fspath(tmp_path / "env"))
    assert builtin.cache_dir() == os.fspath(tmp_path / "env")
    assert builtin.cache_dir(os.fspath(tmp_path / "flag")) == os.fspath(tmp_path / "flag")
    monkeypatch.delenv(builtin.CACHE_DIR_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", os.fspath(tmp_path / "xdg"))
    assert builtin.cache_dir() == os.fspath(tmp_path / "xdg" / "sds-loader")


def test_builtin_run_says_where_it_caches_and_logs_whole_lines(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(builtin.RECORDS_ENV, "12")
    monkeypatch.setattr(progress, "LOG_INTERVAL", 0.0)  # a line per update: the worst case for a log
    cache = os.fspath(tmp_path / "cache")
    assert main(["bench", "--cache-dir", cache, "--batch-size", "4", "--batches", "2"]) == 0
    captured = capsys.readouterr()
    # Two variants of 12 captures of 64 KiB; 16 short records of 1 KiB and 8 frames of 8 KiB
    # for each capture: (2 + 1/4 + 1) x 12 x 64 KiB.
    assert (
        "writing the built-in dataset (zstd, uncompressed, short-zstd, frames-zstd: about 2.56 MB) "
        f"to {cache}, once" in captured.err
    )
    assert "--cache-dir or $SDS_LOADER_CACHE_DIR puts it elsewhere" in captured.err
    # stderr is not a terminal here: whole lines, no carriage-return bars.
    assert "\r" not in captured.err
    assert "warming page cache: done" in captured.err
    [stamp] = os.listdir(tmp_path / "bench-results")
    document = json.loads((tmp_path / "bench-results" / stamp / "bench.json").read_text())
    assert all(spec["uri"].startswith(cache) for spec in document["datasets"].values())
    said: list[str] = []
    builtin.ensure(directory=cache, progress=False, say=said.append)
    assert (
        len(said) == 1 and said[0].startswith("the built-in dataset (") and f"is cached in {cache}" in said[0]
    )


@pytest.mark.parametrize("variant", ["short-zstd", "frames-zstd"])
def test_builtin_small_records_read_back_as_their_kind_wrote_them(tmp_path, variant):
    """Each small-record variant holds its kind's records, byte for byte, as many as it says."""
    from sds_loader import BatchReader

    kind = builtin.SHORT_RECORDS[variant]
    [root] = builtin.ensure(3, directory=os.fspath(tmp_path), progress=False, variants=[variant]).values()
    count = 3 * kind.per_capture
    assert len(sds_factory.sds.open(root)) == count
    ordinals = [count - 1, 0, count // 2, 1]
    batch = BatchReader(root, fields=("samples",), targets=("label", "snr_db")).read(ordinals)
    assert batch["samples"].dtype == np.dtype(kind.dtype)
    assert batch["samples"].shape == (len(ordinals), kind.samples, 2)
    for row, ordinal in enumerate(ordinals):
        expected = kind.record(ordinal)
        assert batch["samples"][row].tobytes() == expected.fields["samples"].data.tobytes()
        assert batch["label"][row] == expected.metadata["label"]
        assert batch["snr_db"][row] == pytest.approx(expected.metadata["snr_db"])
    # Noise, not a constant: records differ, and the field fills its dtype's range as noise does.
    assert batch["samples"][0].tobytes() != batch["samples"][1].tobytes()
    assert float(np.std(batch["samples"].astype(np.float64))) == pytest.approx(kind.scale, rel=0.1)


def test_builtin_frames_hold_the_captures_bytes_in_8_kib_records():
    """RadioML's 1,024 complex samples as 1024 x 2 float32: 8 KiB, eight to a 64 KiB capture."""
    frames = builtin.SHORT_RECORDS["frames-zstd"]
    assert frames.record_bytes == 8192
    assert frames.per_capture * frames.record_bytes == builtin.CHANNELS * builtin.SAMPLES * 8
    record = frames.record(7)
    assert record.fields["samples"].data.shape == (1024, 2)
    assert record.fields["samples"].data.dtype == np.float32
    assert [(axis.name, axis.length) for axis in record.fields["samples"].axes] == [("time", 1024), ("iq", 2)]
    assert set(record.metadata) == {"label", "snr_db"}
    # The full-size dataset's 32,768 frames fill 256 shards.
    assert -(-32768 // builtin._per_shard("frames-zstd", 32768)) == 256


class _Recording(timing.Runner):
    """A runner that records what each instance was asked to do."""

    def __init__(self, log: list, seconds_per_record: float) -> None:
        self.log = log
        self.seconds = seconds_per_record
        self.runs = 0
        log.append(self)

    def run(self, batches):
        self.runs += 1
        self.sizes = [*getattr(self, "sizes", []), len(batches)]
        for batch in batches:
            time.sleep(self.seconds * batch.size)
            yield int(batch.size)


def _plan() -> Plan:
    batches = [np.arange(k, k + 4) for k in range(0, 12, 4)]
    return Plan("v", "/nowhere", "samples", None, batches, record_bytes=8, compression="none")


@pytest.mark.parametrize("seconds_per_record", [0.0, 0.05], ids=["fast", "slow"])
def test_every_row_gets_the_same_passes_each_from_a_fresh_runner(seconds_per_record):
    """A fast row once got more (and warmer) passes than a slow one; now each
    gets PASSES, each by a runner opened for it that reads one warm-up batch
    and the timed batches once."""
    made: list[_Recording] = []
    row = timing.measure(
        _plan(), "k", "label", lambda plan: _Recording(made, seconds_per_record), progress=False
    )
    assert row.status == "ok", row
    assert row.passes == timing.PASSES == len(made)
    assert [runner.runs for runner in made] == [2] * timing.PASSES  # warm-up, then one timed pass
    assert row.records == 12
    if seconds_per_record:
        assert row.seconds >= 12 * seconds_per_record


def test_the_table_header_says_how_rates_were_taken(capsys, root, tmp_path):
    out = tmp_path / "out"
    assert (
        main(["bench", root, "--batch-size", "8", "--batches", "1", "--out", os.fspath(out), "--no-progress"])
        == 0
    )
    printed = capsys.readouterr().out
    assert timing.PASSES_NOTE in printed
    assert f"median of {timing.PASSES} passes, each by a fresh reader" in (out / "bench.md").read_text()
    document = json.loads((out / "bench.json").read_text())
    assert document["passes"] == timing.PASSES
    measured = [row for row in document["rows"] if row["status"] == "ok"]
    assert measured and {row["passes"] for row in measured} == {timing.PASSES}
    assert report.HEADER[2].endswith(f"({timing.PASSES_NOTE})")


def test_each_row_gives_its_passes_range_and_a_wide_one_is_called_out(capsys, root, tmp_path):
    out = tmp_path / "out"
    assert (
        main(["bench", root, "--batch-size", "8", "--batches", "1", "--out", os.fspath(out), "--no-progress"])
        == 0
    )
    document = json.loads((out / "bench.json").read_text())
    for row in (r for r in document["rows"] if r["status"] == "ok"):
        rates = row["pass_rates"]
        assert len(rates) == timing.PASSES
        assert min(rates) <= row["records_per_s"] <= max(rates)
        assert row["spread"] == pytest.approx(max(rates) / min(rates))
    assert "range over passes" in capsys.readouterr().out
    # The table and the line below it, for rows made to spread wide or not.
    steady = timing.Row("v", "a", "steady", records=100, seconds=1.0, passes=3, pass_rates=[100, 104, 98])
    wide = timing.Row("v", "b", "noisy", records=100, seconds=1.0, passes=3, pass_rates=[100, 140, 90])
    cells = report.text([steady, wide])
    assert "(1.06x)" in cells and "(1.56x wide)" in cells
    said = report.wide_rows([steady, wide])
    assert "v: noisy" in said and "steady" not in said and "quiet machine" in said
    assert report.wide_rows([steady]) == ""


def test_a_runner_with_workers_warms_each_of_them_untimed():
    """A DataLoader deals batches to its workers in turn, and each worker opens
    a reader of its own on its first: each gets an untimed batch, so that no
    timed pass includes a worker's start."""
    made: list[_Recording] = []

    def open_runner(plan: Plan) -> _Recording:
        runner = _Recording(made, 0.0)
        runner.warm_up_batches = 2
        return runner

    row = timing.measure(_plan(), "k", "label", open_runner, progress=False)
    assert row.status == "ok" and row.records == 12
    # Two untimed batches, then the plan's three timed, in every pass.
    assert [runner.sizes for runner in made] == [[2, 3]] * timing.PASSES


def test_the_loader_rows_warm_one_batch_per_worker():
    from sds_loader.cli.bench import methods

    sampler = methods._Batches()
    assert methods._LoaderRunner(None, sampler, 0).warm_up_batches == 1
    assert methods._LoaderRunner(None, sampler, 2).warm_up_batches == 2
