"""The `sds-loader` command: bench, inspect and verify on small real datasets.

Datasets are written through signal_dataset (tests/support/sds_factory.py). Checks
that need the native shard tools skip, with the reason, until the extension
is built. Nothing here asserts a speed: only that every row is measured and
reported, and that corruption is found and named.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
from functools import partial

import pytest
import sds_factory
from disk_pages import cached_pages

from sds_loader import cli
from sds_loader.cli import native_tools
from sds_loader.cli.bench import builtin, cold
from sds_loader.cli.bench.run import method_table
from sds_loader.reader import default_threads

NATIVE_SKIP = native_tools.unavailable_reason("shard_summary", "verify_shard", "chunk_payloads")
needs_native = pytest.mark.skipif(NATIVE_SKIP is not None, reason=str(NATIVE_SKIP))

ROW_KEYS = [key for key, _, _ in method_table(2)]
RECORDS = 24
PER_SHARD = 8
make = partial(sds_factory.capture, samples=256)


@pytest.fixture(scope="module")
def zstd_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("zstd") / "ds"
    sds_factory.write_dataset(root, RECORDS, make, records_per_shard=PER_SHARD)
    return str(root)


@pytest.fixture(scope="module")
def plain_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("plain") / "ds"
    sds_factory.write_dataset(
        root, RECORDS, make, records_per_shard=PER_SHARD, writer_options="group_size:1,uncompressed"
    )
    return str(root)


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- --help ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], ["bench", "inspect", "verify"]),
        (["bench"], ["--batch-size", "--threads", "--batches", "--out", "PATH"]),
        (["inspect"], ["PATH", "compression", "--json"]),
        (["verify"], ["PATH", "Exit status", "--json"]),
    ],
)
def test_help(capsys, argv, expected):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([*argv, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for word in expected:
        assert word in out
    assert "--builtin-records" not in out


def test_python_dash_m_runs_the_same_command():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run(
        [sys.executable, "-m", "sds_loader", "verify", "--help"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    assert "usage: sds-loader verify" in done.stdout


def test_bad_option_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["bench", "--batch-size", "0"])
    assert exit_info.value.code == 2
    assert "at least 1" in capsys.readouterr().err


def test_missing_dataset_is_one_line_and_status_2(capsys, tmp_path):
    code, _, err = run_cli(capsys, "inspect", str(tmp_path / "nowhere"))
    assert code == 2
    assert err.startswith("sds-loader inspect: error:")
    assert "Traceback" not in err


# -- inspect -----------------------------------------------------------------


def test_inspect_reports_records_shards_and_fields(capsys, zstd_root):
    code, out, _ = run_cli(capsys, "inspect", zstd_root)
    assert code == 0
    assert f"records   {RECORDS}" in out
    assert f"shards    {RECORDS // PER_SHARD} data" in out
    assert "samples" in out and "complex64" in out and "(2, 256)" in out
    assert "label (int)" in out


def test_inspect_json(capsys, zstd_root):
    code, out, _ = run_cli(capsys, "inspect", zstd_root, "--json")
    assert code == 0
    report = json.loads(out)
    assert report["records"] == RECORDS
    assert report["fields"] == {"samples": {"dtype": "complex64", "shape": [2, 256], "axes": ["a0", "a1"]}}
    assert [shard["records"] for shard in report["shards"]] == [PER_SHARD] * (RECORDS // PER_SHARD)
    assert report["totals"]["file_size"] == sum(
        os.path.getsize(p) for p in sds_factory.data_shards(zstd_root)
    )


@needs_native
def test_inspect_zstd_noise_gets_the_uncompressed_advice(capsys, zstd_root):
    report = json.loads(run_cli(capsys, "inspect", zstd_root, "--json")[1])
    for shard in report["shards"]:
        assert shard["compression"] == "zstd"
        assert shard["max_records_per_chunk"] == 1
        assert shard["num_records"] == PER_SHARD
        assert 0 < shard["encoded_bytes"] < shard["decoded_bytes"] < shard["file_size"] * 1.2
    assert any('writer_options="group_size:1,uncompressed"' in note for note in report["notes"])
    out = run_cli(capsys, "inspect", zstd_root)[1]
    assert "zstd" in out and "Compression saves little" in out


@needs_native
def test_inspect_uncompressed_has_no_advice(capsys, plain_root):
    report = json.loads(run_cli(capsys, "inspect", plain_root, "--json")[1])
    assert {shard["compression"] for shard in report["shards"]} == {"none"}
    assert report["notes"] == []


@needs_native
def test_inspect_notes_grouped_chunks(capsys, tmp_path):
    root = tmp_path / "grouped"
    sds_factory.write_dataset(root, 8, make, writer_options="group_size:4,zstd:3")
    report = json.loads(run_cli(capsys, "inspect", str(root), "--json")[1])
    assert report["shards"][0]["max_records_per_chunk"] == 4
    assert any("up to 4 records" in note for note in report["notes"])


# -- verify ------------------------------------------------------------------


def test_verify_without_the_extension_says_how_to_build(capsys, zstd_root, monkeypatch):
    def missing(name):
        raise native_tools.NativeUnavailable("not built; pip install it", "not built")

    monkeypatch.setattr(native_tools, "function", missing)
    code, _, err = run_cli(capsys, "verify", zstd_root, "--no-progress")
    assert code == 2
    assert "pip install" in err


@needs_native
def test_verify_clean_dataset_exits_0(capsys, zstd_root):
    code, out, _ = run_cli(capsys, "verify", zstd_root, "--no-progress")
    assert code == 0, out
    assert out.startswith("clean:")
    report = json.loads(run_cli(capsys, "verify", zstd_root, "--json", "--no-progress")[1])
    assert report["clean"] is True
    assert report["records_checked"] == RECORDS
    # Data and metadata shards both.
    assert report["shards_checked"] == 2 * (RECORDS // PER_SHARD)


def _copy(root: str, tmp_path) -> str:
    copy = str(tmp_path / "copy")
    shutil.copytree(root, copy)
    return copy


@needs_native
def test_verify_finds_a_flipped_byte_in_chunk_data(capsys, zstd_root, tmp_path):
    root = _copy(zstd_root, tmp_path)
    shard = sds_factory.data_shards(root)[1]
    record = 3
    # Locate record 3's compressed chunk data in the file and flip its middle byte.
    _, payload, _ = native_tools.function("chunk_payloads")(shard, [record])[0]
    with open(shard, "rb") as handle:
        data = bytearray(handle.read())
    start = data.find(payload)
    assert start > 0 and data.find(payload, start + 1) == -1
    data[start + len(payload) // 2] ^= 0x40
    with open(shard, "wb") as handle:
        handle.write(data)
    ordinal = sds_factory.sds.open(root).read_instructions(0, RECORDS)
    first = {os.path.realpath(i.filename): i.first_ordinal - i.skip for i in ordinal}[os.path.realpath(shard)]

    code, out, _ = run_cli(capsys, "verify", root, "--no-progress")
    assert code == 1
    assert out.startswith("CORRUPT: 1 of")
    assert os.path.basename(shard) in out

    report = json.loads(run_cli(capsys, "verify", root, "--json", "--no-progress")[1])
    assert report["clean"] is False
    [bad] = report["corrupt_shards"]
    assert os.path.realpath(bad["path"]) == os.path.realpath(shard)
    assert bad["problems"], bad
    # One record per chunk: the failed chunk is record 3's, and its ordinal is named.
    assert any(
        (p["record"] == record or p["chunk"] == record) and p["ordinals"] == [first + record]
        for p in bad["problems"]
    ), bad["problems"]
    assert f"ordinal {first + record}" in out


@needs_native
def test_verify_finds_a_flipped_byte_in_a_metadata_shard(capsys, zstd_root, tmp_path):
    root = _copy(zstd_root, tmp_path)
    [shard] = [
        path
        for path in sorted(glob.glob(os.path.join(root, "objects", "metadata", "*", "*.arrayrecord")))
        if os.path.basename(path) == os.path.basename(sds_factory.data_shards(root)[0])
    ]
    # The first record chunk starts at byte 64 (after the signature chunk);
    # its 40-byte header is followed by its data.
    with open(shard, "r+b") as handle:
        handle.seek(64 + 40 + 16)
        byte = handle.read(1)
        handle.seek(64 + 40 + 16)
        handle.write(bytes([byte[0] ^ 0x40]))
    code, out, _ = run_cli(capsys, "verify", root, "--no-progress")
    assert code == 1
    assert "metadata shard" in out and os.path.basename(shard) in out
    report = json.loads(run_cli(capsys, "verify", root, "--json", "--no-progress")[1])
    [bad] = report["corrupt_shards"]
    assert bad["kind"] == "metadata"
    assert [p["ordinals"] for p in bad["problems"]] == [[0]]


@needs_native
def test_verify_reports_a_truncated_shard(capsys, zstd_root, tmp_path):
    root = _copy(zstd_root, tmp_path)
    shard = sds_factory.data_shards(root)[0]
    with open(shard, "r+b") as handle:
        handle.truncate(os.path.getsize(shard) // 2)
    report = json.loads(run_cli(capsys, "verify", root, "--json", "--no-progress")[1])
    assert report["clean"] is False
    assert [os.path.basename(s["path"]) for s in report["corrupt_shards"]] == [os.path.basename(shard)]
    assert run_cli(capsys, "verify", root, "--no-progress")[0] == 1


# -- bench -------------------------------------------------------------------


def _rows(document, variant):
    return {row["key"]: row for row in document["rows"] if row["variant"] == variant}


def _check_bench_document(document, variants, records):
    assert sorted(document["datasets"]) == sorted(variants)
    for variant in variants:
        rows = _rows(document, variant)
        assert list(rows) == ROW_KEYS
        for key, row in rows.items():
            if row["status"] == "skipped":
                # Only what cannot run here may be skipped, and it says why.
                assert key.startswith("bound_decompress") or NATIVE_SKIP, row
                assert row["note"].startswith("skipped:"), row
                continue
            assert row["status"] == "ok", row
            assert row["records"] == records, row
            assert row["seconds"] > 0 and row["records_per_s"] > 0 and row["mb_per_s"] > 0, row
        # Each ratio is that row's own rate over the baseline's or the bound's,
        # so a ratio taken against the wrong row, or left out, fails here.
        baseline = rows["sds_getitems"]["records_per_s"]
        bound = document["datasets"][variant]["bound"]
        assert [key for key, row in rows.items() if row["is_bound"]] == [bound]
        bound_rate = rows[bound]["records_per_s"]
        for key, row in rows.items():
            if row["status"] != "ok":
                assert row["x_vs_signal_dataset"] is None and row["pct_of_bound"] is None, row
                continue
            assert row["records_per_s"] == pytest.approx(row["records"] / row["seconds"]), row
            assert row["x_vs_signal_dataset"] == pytest.approx(row["records_per_s"] / baseline), row
            if key.startswith("bound_") and key != bound:
                assert row["pct_of_bound"] is None, row  # context, not a method
            elif bound_rate:
                assert row["pct_of_bound"] == pytest.approx(100 * row["records_per_s"] / bound_rate), row


def test_bench_on_a_dataset_writes_every_row(capsys, zstd_root, tmp_path):
    # The rows read through DataLoader, and the baseline every ratio is taken against.
    import torch_required  # noqa: F401 - skips this test without torch

    out_dir = tmp_path / "results"
    code, out, err = run_cli(
        capsys,
        "bench",
        zstd_root,
        "--batches",
        "2",
        "--batch-size",
        "8",
        "--out",
        str(out_dir),
        "--threads",
        "2",
        "--no-progress",
    )
    assert code == 0, out + err
    document = json.loads((out_dir / "bench.json").read_text())
    [variant] = document["datasets"]
    assert variant == ("dataset" if NATIVE_SKIP else "zstd")
    _check_bench_document(document, [variant], records=16)
    assert document["batch_size"] == 8 and document["threads"] == 2
    assert document["command"].startswith("sds-loader bench ")
    assert document["datasets"][variant]["inputs"] == "samples"
    assert document["datasets"][variant]["target"] == "label"
    assert document["datasets"][variant]["record_bytes"] == 2 * 256 * 8
    # The printed table and the markdown carry a line per row.
    for row in document["rows"]:
        assert row["label"] in out
    markdown = (out_dir / "bench.md").read_text()
    assert markdown.count(f"| {variant} |") == len(ROW_KEYS)
    assert (out_dir / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_builtin_dataset_is_written_once_and_measured_per_variant(capsys, tmp_path, monkeypatch):
    import torch_required  # noqa: F401 - skips this test without torch

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv(builtin.RECORDS_ENV, "12")
    out_dir = tmp_path / "results"
    argv = ["bench", "--batches", "2", "--batch-size", "4", "--out", str(out_dir), "--no-progress"]
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, out + err
    document = json.loads((out_dir / "bench.json").read_text())
    _check_bench_document(document, ["zstd", "uncompressed", "short-zstd", "frames-zstd"], records=8)
    roots = {variant: spec["uri"] for variant, spec in document["datasets"].items()}
    for variant, root in roots.items():
        assert root.startswith(str(tmp_path / "cache" / "sds-loader"))
    # 12 captures; 16 short records and 8 frames for each.
    records = {variant: len(sds_factory.sds.open(root)) for variant, root in roots.items()}
    assert records == {"zstd": 12, "uncompressed": 12, "short-zstd": 192, "frames-zstd": 96}
    record_bytes = {variant: spec["record_bytes"] for variant, spec in document["datasets"].items()}
    assert record_bytes == {"zstd": 65536, "uncompressed": 65536, "short-zstd": 1024, "frames-zstd": 8192}
    # Small records spread over many shards, at least 16 records a shard when the dataset is small.
    assert len(sds_factory.data_shards(roots["short-zstd"])) == 192 // 16
    assert len(sds_factory.data_shards(roots["frames-zstd"])) == 96 // 16
    assert document["datasets"]["short-zstd"]["bound"] == "bound_decompress"
    assert document["datasets"]["frames-zstd"]["bound"] == "bound_decompress"
    assert document["datasets"]["zstd"]["bound"] == "bound_decompress"
    assert document["datasets"]["uncompressed"]["bound"] == "bound_memcpy"
    assert _rows(document, "uncompressed")["bound_decompress"]["status"] == "skipped"
    # Every variant has its rows in the markdown table and its line in the legend.
    markdown = (out_dir / "bench.md").read_text()
    for variant in ("zstd", "uncompressed", "short-zstd", "frames-zstd"):
        assert markdown.count(f"| {variant} |") == len(ROW_KEYS), variant
        assert f"\n{variant}: the built-in " in "\n" + out, variant
    assert "frames-zstd: the built-in frames (96 captures of 1024x2 float32 noise in 6 shards" in out

    # Cached: the second run reuses the same files rather than writing them again.
    stamps = {root: os.stat(os.path.join(root, "root.json")).st_mtime_ns for root in roots.values()}
    assert builtin.ensure(progress=False) == roots
    assert {root: os.stat(os.path.join(root, "root.json")).st_mtime_ns for root in roots.values()} == stamps


def test_builtin_size_override():
    assert builtin.record_count(5) == 5
    with pytest.raises(ValueError, match="at least one"):
        builtin.record_count(0)


def test_bench_cold_drops_pages_and_times_each_thread_count(capsys, zstd_root, tmp_path):
    import torch_required  # noqa: F401 - skips this test without torch

    out_dir = tmp_path / "cold"
    code, out, err = run_cli(
        capsys,
        "bench",
        zstd_root,
        "--cold",
        "--batches",
        "2",
        "--batch-size",
        "8",
        "--out",
        str(out_dir),
        "--no-progress",
    )
    assert code == 0, out + err
    document = json.loads((out_dir / "bench.json").read_text())
    assert document["cold"] is True
    [variant] = document["datasets"]
    rows = _rows(document, variant)
    assert list(rows) == [key for key, _, _ in cold.method_table(default_threads())]
    assert {
        "batchreader_default",
        "batchreader_1",
        "batchreader_2",
        "batchreader_8",
        "batchreader_32",
    } <= set(rows)
    for key, row in rows.items():
        if key.startswith("bound_") or NATIVE_SKIP:
            continue
        assert row["status"] == "ok" and row["records"] == 16, row
        assert row["label"].endswith(", cold"), row
    # Every BatchReader row says how many threads it ran, the default one too.
    assert f"default ({default_threads()} thread" in rows["batchreader_default"]["label"]
    assert rows["batchreader_32"]["label"] == "BatchReader.read, 32 threads, cold"


def test_cold_passes_start_from_dropped_pages(disk_path):
    # On the checkout's disk: in a tmpfs folder the pages could never be dropped.
    path = disk_path / "shard"
    with open(path, "wb") as handle:
        handle.write(os.urandom(1 << 20))
        os.fsync(handle.fileno())  # dirty pages cannot be dropped, clean ones can
    with open(path, "rb") as handle:
        handle.read()  # now cached
    assert all(cached_pages(str(path)))
    cold.drop_pages([str(path)])
    assert not cached_pages(str(path))[128]  # the middle page: a few just read may linger


def test_every_reader_row_names_its_thread_count():
    for key, label, _ in method_table(2):
        if key.startswith(("batchreader", "torch")):
            assert re.search(r"\b\d+ threads?\b", label), label
    labels = {key: label for key, label, _ in method_table(2)}
    assert labels["batchreader_b4_t2"] == "BatchReader.read, batches of 4, 2 threads"
    assert labels["batchreader_b16_t1"] == "BatchReader.read, batches of 16, 1 thread"
    assert labels["torch_w0"].endswith(f", {default_threads()} thread" + "s" * (default_threads() != 1))
