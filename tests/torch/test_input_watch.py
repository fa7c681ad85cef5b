"""`InputWatch`: the training loop's wait for data, and the diagnosis in words.

A loop whose model step (a sleep of 50 ms) dwarfs a fast loader is reported
as not input-bound; one whose loader was slowed on purpose (one thread, zstd
records of 128 KiB, no workers) against a 1 ms step is input-bound, with
decompression named and the remedies for it. Under torchrun, two ranks of
different input layouts (rank 0 on two workers, not waiting; rank 1 on none,
waiting) are both told of rank 1's reads, layout and remedy. With stage
timing off the reads time nothing, and the diagnosis says so.
"""

from __future__ import annotations

from torch_required import torch  # noqa: F401 - skips this module without torch

import json
import os
import time

import pytest
from native_required import _native  # noqa: F401
from rank_launch import torchrun
from repo_paths import SUPPORT
from sds_factory import capture, write_dataset
from torch.utils.data import DataLoader

from sds_loader import BatchReader, InputReport, InputWatch, stage_times
from sds_loader.input_diagnosis import INPUT_BOUND_SHARE
from sds_loader.stage_times import STAGE_MEANINGS
from sds_loader.torch import SDSTorchDataset, collate


@pytest.fixture(scope="module")
def small_root(tmp_path_factory):
    path = tmp_path_factory.mktemp("watch") / "small"
    write_dataset(path, 32, records_per_shard=16)
    return str(path)


@pytest.fixture(scope="module")
def large_zstd_root(tmp_path_factory):
    path = tmp_path_factory.mktemp("watch") / "large"
    # Enough batches that the batch buffers are reused: the first ones fault in fresh pages.
    write_dataset(path, 128, lambda k: capture(k, samples=8192), records_per_shard=32)
    return str(path)


def test_a_slow_step_and_a_fast_loader_is_not_input_bound(small_root):
    dataset = SDSTorchDataset(small_root, threads=1)
    loader = DataLoader(dataset, batch_size=4, collate_fn=collate)
    watch = InputWatch(loader, stats=dataset)
    for _ in watch:
        time.sleep(0.05)
    report = watch.report()
    assert report.steps == 8 and len(report.step_seconds) == 8
    assert all(step >= 0.05 for step in report.step_seconds)
    assert report.wait_share < INPUT_BOUND_SHARE
    assert report.reads is not None and report.reads.native_records == 32
    text = report.diagnosis()
    assert "not input-bound" in text and "model" in text, text


def test_a_loader_slowed_on_purpose_is_input_bound_on_decompression(large_zstd_root):
    dataset = SDSTorchDataset(large_zstd_root, threads=1)
    loader = DataLoader(dataset, batch_size=16, collate_fn=collate)
    watch = InputWatch(loader, stats=dataset)
    for _ in watch:
        time.sleep(0.001)
    report = watch.report()
    assert report.steps == 8
    assert report.wait_share > 2 * INPUT_BOUND_SHARE, report
    text = report.diagnosis()
    assert "It is input-bound." in text, text
    assert "training process itself" in text, text
    if os.environ.get("SDS_LOADER_SANITIZED") == "1":
        return  # the sanitizer slows the core's own code more than zstd: another stage may lead
    assert "decompressing" in text, text
    # The remedies for decompression in the main process: workers or threads, or no compression.
    assert "num_workers=" in text and "uncompressed" in text, text


def test_the_wait_is_the_time_inside_next():
    def slow_batches():
        for k in range(5):
            time.sleep(0.02)
            yield k

    watch = InputWatch(slow_batches())
    assert list(watch) == [0, 1, 2, 3, 4]
    report = watch.report()
    assert len(report.waits) == 5 and min(report.waits) >= 0.02
    assert report.wait_share > 0.9
    assert report.reads is None
    assert "Pass stats=" in report.diagnosis()


def test_a_reader_as_stats_source_and_too_few_steps(small_root):
    reader = BatchReader(small_root, threads=1)
    watch = InputWatch([reader.read([0, 1])], stats=reader)
    for _ in watch:
        reader.read([2, 3, 4])
    report = watch.report()
    assert isinstance(report, InputReport)
    assert report.reads is not None and report.reads.native_records == 3
    assert "no steady wait" in report.diagnosis()
    with pytest.raises(TypeError, match="stats= takes"):
        list(InputWatch([1], stats=42))


def gloo_available() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_gloo_available()


@pytest.mark.slow
def test_stats_and_waits_reduce_over_two_ranks(tmp_path, small_root):
    if not gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    out = tmp_path / "ranks"
    out.mkdir()
    torchrun(2, os.path.join(SUPPORT, "stats_rank_worker.py"), small_root, str(out))
    reports = [json.loads((out / f"rank-{rank}.json").read_text()) for rank in (0, 1)]
    for report in reports:
        # 4 records on rank 0 and 8 on rank 1, summed on both ranks.
        assert report["summed_records"] == 12 and report["report_records"] == 12
        assert report["ranks"] == [[0, 2], [1, 4]]
        assert "Across 2 ranks" in report["diagnosis"]
    total = reports[0]["own_decompress"] + reports[1]["own_decompress"]
    assert reports[0]["summed_decompress"] == pytest.approx(total)


@pytest.mark.slow
def test_the_diagnosis_of_two_ranks_speaks_of_the_one_that_waits(tmp_path, large_zstd_root):
    """Rank 0 reads most of the bytes, in two workers, and does not wait; rank 1 reads in its
    own process and waits: both ranks' reports give rank 1's stages, layout and remedy."""
    if not gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    out = tmp_path / "ranks"
    out.mkdir()
    torchrun(2, os.path.join(SUPPORT, "input_rank_worker.py"), large_zstd_root, str(out))
    ranks = [json.loads((out / f"rank-{rank}.json").read_text()) for rank in (0, 1)]
    assert ranks[0]["wait_share"] < INPUT_BOUND_SHARE < 2 * INPUT_BOUND_SHARE < ranks[1]["wait_share"], ranks
    # The job's reads summed are mostly rank 0's workers': what spoke for rank 1 before.
    assert (
        ranks[0]["worker_seconds"] > sum(ranks[1]["stage_seconds"].values())
        and ranks[1]["worker_seconds"] == 0
    )
    seconds = ranks[1]["stage_seconds"]
    stage = max(seconds, key=seconds.__getitem__)
    own = f"{100 * seconds[stage] / sum(seconds.values()):.0f}% of it {STAGE_MEANINGS[stage].split(' (')[0]}"
    took = f"{1e3 * sum(seconds.values()):.1f} ms"  # under a second: the reads of 32 records
    for rank, report in enumerate(ranks):
        text = report["diagnosis"]
        # Rank 1's layout and its remedy, not rank 0's (whose workers read most of the bytes).
        assert "in the DataLoader workers" not in text and "more DataLoader workers" not in text, text
        assert "in the training process itself (no workers), " + own in text, text
        assert "DataLoader workers (num_workers=2 or more)" in text, text
        # Named, with its own reads' time; the rank that does not wait is not spoken of.
        assert f"On rank 1 the reads took {took} " in text, text
        assert "On rank 0" not in text, text
        assert text.startswith(f"On this rank (rank {rank}) the loop waited for data"), text
    assert "what follows is about rank 1" in ranks[0]["diagnosis"], ranks[0]["diagnosis"]


def test_stage_times_off_say_that_nothing_was_timed(large_zstd_root):
    with stage_times.sampled_every(0):
        reader = BatchReader(large_zstd_root, threads=1)
    watch = InputWatch((reader.read(list(range(k, k + 16))) for k in range(0, 128, 16)), stats=reader)
    for _ in watch:
        pass  # every step is a read: the loop waits all its time
    report = watch.report()
    assert report.wait_share > 2 * INPUT_BOUND_SHARE, report
    assert report.reads is not None and report.reads.native_records == 128
    assert report.reads.stage_seconds == dict.fromkeys(stage_times.STAGES, 0.0)
    text = report.diagnosis()
    assert "It is input-bound." in text, text
    assert "not timed stage by stage" in text and "SDS_LOADER_STAGE_SAMPLING=0" in text, text
    assert "Python" not in text and "took" not in text.split("It is input-bound.")[1], text
