"""Stage times: where each read's threads spent their time, summed into `reader.stats`.

Structural facts only, robust on a shared 2-core machine: at one thread the
median batch's stages add up to its wall time within 10%; a read that
checks no hash spends no time hashing, an uncompressed one none
decompressing; snapshots freeze, subtract and add. Speed (what timing them costs) is the bench's
"stage times off" row, not a test.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest
from native_required import _native
from repo_paths import REPO
from sds_factory import capture, write_dataset

import sds_loader
from sds_loader import stage_times

RECORDS = 48
#: Under AddressSanitizer (scripts/test_sanitized.sh) the core's own code runs
#: several times slower and the vendored zstd less so: which stage is largest
#: is a fact of the plain build only, and the untimed gaps between stages grow.
SANITIZED = os.environ.get("SDS_LOADER_SANITIZED") == "1"
WALL_TOLERANCE = 0.30 if SANITIZED else 0.10


def big_capture(ordinal: int):
    # 32 KiB records: decoding, not Python, is most of a batch's time.
    return capture(ordinal, samples=2048)


@pytest.fixture(scope="module")
def zstd_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("stages") / "zstd"
    write_dataset(root, RECORDS, big_capture, records_per_shard=16)
    return str(root)


@pytest.fixture(scope="module")
def plain_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("stages") / "plain"
    write_dataset(
        root, RECORDS, big_capture, records_per_shard=16, writer_options="group_size:1,uncompressed"
    )
    return str(root)


def timed_reads(reader: sds_loader.BatchReader, batches: int = 12) -> tuple[sds_loader.ReadStats, float]:
    """The stats and wall time of `batches` shuffled batches of 16, after one untimed batch."""
    rng = np.random.default_rng(3)
    orders = [rng.permutation(RECORDS)[:16] for _ in range(batches)]
    reader.read(orders[0])
    before = reader.stats.snapshot()
    wall = 0.0
    for order in orders:
        started = time.perf_counter()
        reader.read(order)
        wall += time.perf_counter() - started
    return reader.stats.snapshot() - before, wall


def core_stages(seconds: dict[str, float]) -> dict[str, float]:
    """The core's stages, less "python": the reads' wall time less the core's, which on a loaded
    machine takes in every preemption (and a batch of 16 short records spends about as long in
    Python as in zstd)."""
    return {stage: value for stage, value in seconds.items() if stage != "python"}


def accounted(reader: sds_loader.BatchReader, batches: int = 12) -> float:
    """The median over `batches` shuffled batches of 16 of each batch's stage times over its wall time.

    A median of batches, not one sum over all: on a loaded machine a thread
    preempted between two stages loses that time from every stage, and
    takes it from the batch it happens in only.
    """
    rng = np.random.default_rng(5)
    reader.read(rng.permutation(RECORDS)[:16])
    ratios = []
    for _ in range(batches):
        order = rng.permutation(RECORDS)[:16]
        before = reader.stats.snapshot()
        started = time.perf_counter()
        reader.read(order)
        wall = time.perf_counter() - started
        ratios.append(sum((reader.stats.snapshot() - before).stage_seconds.values()) / wall)
    return float(np.median(ratios))


def test_stage_names_are_the_cores():
    assert tuple(_native.STAGES) == stage_times.STAGES
    assert set(stage_times.STAGE_MEANINGS) == set(stage_times.STAGES)


@pytest.mark.parametrize("kind", ["zstd", "plain"])
def test_stages_add_up_to_the_wall_time_at_one_thread(kind, zstd_root, plain_root):
    reader = sds_loader.BatchReader(zstd_root if kind == "zstd" else plain_root, threads=1)
    spent, _ = timed_reads(reader)
    seconds = spent.stage_seconds
    assert set(seconds) == set(stage_times.STAGES)
    assert all(value >= 0 for value in seconds.values()), seconds
    assert seconds["python"] > 0 and seconds["plan"] > 0
    assert spent.native_records == 12 * 16
    assert accounted(reader) == pytest.approx(1.0, rel=WALL_TOLERANCE), seconds


def test_checksums_off_spend_no_time_hashing(zstd_root, plain_root):
    for root in (zstd_root, plain_root):
        unverified, _ = timed_reads(sds_loader.BatchReader(root, threads=1, verify_checksums=False))
        assert unverified.stage_seconds["hash"] == 0.0, unverified.stage_seconds
    verified, _ = timed_reads(sds_loader.BatchReader(zstd_root, threads=1))
    assert verified.stage_seconds["hash"] > 0, verified.stage_seconds


def test_uncompressed_spends_no_time_decompressing(zstd_root, plain_root):
    plain, _ = timed_reads(sds_loader.BatchReader(plain_root, threads=2))
    assert plain.stage_seconds["decompress"] == 0.0, plain.stage_seconds
    assert plain.stage_seconds["wait"] > 0  # the copy out of the page cache
    compressed, _ = timed_reads(sds_loader.BatchReader(zstd_root, threads=2))
    seconds = compressed.stage_seconds
    # zstd noise: decompression is the core's largest stage by far.
    assert seconds["decompress"] > 0
    if not SANITIZED:
        core = core_stages(seconds)
        assert core["decompress"] == max(core.values()), seconds


def test_two_threads_sum_their_threads(zstd_root):
    reader = sds_loader.BatchReader(zstd_root, threads=2)
    reader.process_state().native.work_per_helper = 0  # wake the helper whatever the batch
    # On a loaded machine the reading thread may finish a batch's runs before
    # its woken helper is scheduled at all: read again (bounded) until the
    # helper has taken part, so that the sum below covers two threads.
    for _ in range(20):
        spent, wall = timed_reads(reader)
        if spent.helped_batches > 0:
            break
    assert spent.helped_batches > 0
    core = sum(v for k, v in spent.stage_seconds.items() if k != "python")
    # Summed over threads, never more than both threads' whole time.
    assert 0 < core <= 2 * wall * 1.05, (spent.stage_seconds, wall)


def test_snapshots_freeze_subtract_and_add(zstd_root):
    reader = sds_loader.BatchReader(zstd_root, threads=1)
    reader.read([0, 1, 2])
    first = reader.stats.snapshot()
    frozen = first.stage_seconds
    reader.read([3, 4])
    assert first.stage_seconds == frozen and first.native_records == 3
    second = reader.stats.snapshot()
    between = second - first
    assert between.native_records == 2 and between.batches == 1
    assert all(value >= 0 for value in between.stage_seconds.values())
    assert sum(between.stage_seconds.values()) > 0
    both = first + between
    assert both.native_records == second.native_records
    assert both.stage_seconds == pytest.approx(second.stage_seconds)
    with pytest.raises(TypeError):
        first - 1  # type: ignore[operator]


@pytest.mark.parametrize("every", [1, 3])
def test_timing_every_run_or_some_accounts_every_second(zstd_root, every):
    assert stage_times.sampling() == stage_times.DEFAULT_SAMPLING > 1
    with stage_times.sampled_every(every):
        reader = sds_loader.BatchReader(zstd_root, threads=1)
    assert reader.process_state().native.stage_sampling == every
    spent, _ = timed_reads(reader)
    assert accounted(reader) == pytest.approx(1.0, rel=WALL_TOLERANCE)
    if not SANITIZED:
        core = core_stages(spent.stage_seconds)
        assert core["decompress"] == max(core.values()), spent.stage_seconds


def test_untimed_reads_time_nothing_not_even_python(zstd_root):
    # A lone "python" stage would read as the whole of the reads' time.
    with stage_times.sampled_every(0):
        untimed = sds_loader.BatchReader(zstd_root, threads=1)
    spent = timed_reads(untimed)[0]
    assert spent.native_records == 12 * 16
    assert spent.stage_seconds == dict.fromkeys(stage_times.STAGES, 0.0)


#: How the pages write "one run of a batch in N".
IN_WORDS = {2: "two", 3: "three", 4: "four", 8: "eight"}


def test_one_default_in_the_core_the_python_and_both_pages(zstd_root):
    """What is timed by default, said alike by the core, the Python and both pages that say it."""
    every = stage_times.DEFAULT_SAMPLING
    assert _native.ShardSet([], True, 8).stage_sampling == every
    assert sds_loader.BatchReader(zstd_root, threads=1).process_state().native.stage_sampling == every
    said = f"one run of a batch in {IN_WORDS[every]}"
    for page in ("input-bound.md", "performance.md"):
        with open(os.path.join(REPO, "docs", page), encoding="utf-8") as handle:
            lines = handle.read().splitlines()
        # A table's row is a claim of its own; the prose, sentence by sentence.
        rows = [line for line in lines if line.startswith("|") and "default" in line]
        prose = " ".join(" ".join(line for line in lines if not line.startswith("|")).split())
        sentences = [s for s in re.split(r"(?<=[.;:])\s", prose) if "default" in s and "timed" in s]
        assert sentences, page
        for claim in sentences + rows:
            assert said in claim.lower(), (page, claim)


def test_a_bad_sampling_setting_names_the_variable():
    code = "import sds_loader.stage_times"
    env = {"SDS_LOADER_STAGE_SAMPLING": "often", "PATH": ""}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode != 0
    assert "SDS_LOADER_STAGE_SAMPLING='often'" in result.stderr
    with pytest.raises(ValueError, match="non-negative"):
        with stage_times.sampled_every(-1):
            pass


def test_a_read_from_object_storage_waits_for_its_bytes(tmp_path, rclone_server):
    from s3_fixtures import upload_dataset

    write_dataset(tmp_path, 24, big_capture, records_per_shard=8)
    uri = upload_dataset(rclone_server, tmp_path, "stage-times")
    with stage_times.sampled_every(1):
        reader = sds_loader.BatchReader(uri, threads=1, requests_in_flight=2)
    before = reader.stats.snapshot()
    reader.read(np.arange(0, 24, 2))
    spent = reader.stats.snapshot() - before
    assert spent.fetched_bytes > 0 and spent.native_records == 12
    seconds = spent.stage_seconds
    # Requests in flight to a server on this machine: waited for, not computed.
    assert seconds["wait"] > 0 and seconds["decompress"] > 0, seconds
