"""The diagnosis's words: the verdict at the threshold, and each dominant stage's remedy."""

from __future__ import annotations

import pytest

from sds_loader import ReadStats
from sds_loader.input_diagnosis import INPUT_BOUND_SHARE, diagnose
from sds_loader.stage_times import STAGES, from_mapping


def stats(stage: str, **counts: int) -> ReadStats:
    seconds = dict.fromkeys(STAGES, 0.01)
    seconds[stage] = 1.0
    return ReadStats(**counts, _stage=from_mapping(seconds))


def words(share: float, reads: ReadStats | None, workers: ReadStats | None = None, ranks=()) -> str:
    return diagnose(
        steps=10,
        wait_share=share,
        mean_step=0.01,
        first_wait=0.2,
        ranks=list(ranks),
        reads=reads,
        worker_reads=workers,
    )


def test_the_threshold_decides_the_verdict():
    assert "not input-bound" in words(INPUT_BOUND_SHARE, stats("decompress"))
    assert "It is input-bound." in words(INPUT_BOUND_SHARE + 0.01, stats("decompress"))


@pytest.mark.parametrize(
    ("stage", "counts", "expected"),
    [
        ("decompress", {}, "num_workers=2 or more"),
        ("wait", {}, "ShardAwareSampler"),
        ("wait", {"fetched_bytes": 1 << 20, "fetch_requests": 3}, "node cache (cache_dir=)"),
        ("hash", {}, 'verify_checksums="once"'),
        ("python", {}, "larger batches"),
        ("parse", {}, "CPU work in the reader"),
    ],
)
def test_each_dominant_stage_gets_its_remedy(stage, counts, expected):
    text = words(0.6, stats(stage, **counts))
    assert expected in text, text
    assert "training process itself" in text


def test_reads_in_workers_are_named_so():
    reads = stats("decompress")
    text = words(0.6, reads, workers=reads)
    assert "in the DataLoader workers" in text and "more DataLoader workers" in text


def test_the_worst_rank_decides():
    text = words(0.02, stats("decompress"), ranks=[(0, 0.02), (1, 0.4)])
    assert "from 2% (rank 0) to 40% (rank 1)" in text and "It is input-bound." in text


def test_no_stage_times_says_why():
    assert "SDS_LOADER_STAGE_SAMPLING=0" in words(0.6, ReadStats())
