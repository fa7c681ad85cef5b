"""The diagnosis's words: the verdict at the threshold, and each dominant stage's remedy."""

from __future__ import annotations

import pytest

from sds_loader import ReadStats
from sds_loader.input_diagnosis import INPUT_BOUND_SHARE, diagnose
from sds_loader.rank_share import RankShare
from sds_loader.stage_times import STAGES, from_mapping

#: What `stats` sums to: 1 s in its stage and 10 ms in each other, with its stage's share.
ONE_STAGE = 1.0 + 0.01 * (len(STAGES) - 1)
ONE_STAGE_SHARE = f"{1.0 / ONE_STAGE:.0%}"


def stats(stage: str, **counts: int) -> ReadStats:
    seconds = dict.fromkeys(STAGES, 0.01)
    seconds[stage] = 1.0
    return ReadStats(**counts, _stage=from_mapping(seconds))


def words(
    share: float, reads: ReadStats | None, workers: ReadStats | None = None, ranks=(), rank=None
) -> str:
    return diagnose(
        steps=10,
        wait_share=share,
        mean_step=0.01,
        first_wait=0.2,
        ranks=list(ranks),
        rank=rank,
        reads=reads,
        worker_reads=workers,
    )


def rank(number: int, share: float, reads: ReadStats | None = None, in_workers: bool = False) -> RankShare:
    """A rank that waited `share` of a 1 s loop, its reads all in its workers or none there."""
    workers = None if reads is None else (reads if in_workers else ReadStats())
    return RankShare(number, 10, share, 1.0, reads, workers)


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
        ("augment", {}, "resampling costs the most"),
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
    text = words(0.02, stats("decompress"), ranks=[rank(0, 0.02), rank(1, 0.4)], rank=0)
    assert "from 2% (rank 0) to 40% (rank 1)" in text and "The job is input-bound: rank 1 waits" in text
    assert text.startswith("On this rank (rank 0) the loop waited for data 2%"), text
    assert "Pass stats=" in text


def test_the_waiting_rank_is_described_from_its_own_reads():
    # Rank 0 reads far more, in its workers, and does not wait; rank 1 reads in its own process.
    busy = stats("copy")
    busy = busy + busy + busy
    ranks = [rank(0, 0.01, busy, in_workers=True), rank(1, 0.7, stats("decompress"))]
    summed = ranks[0].reads + ranks[1].reads
    for me in (0, 1):
        text = words(ranks[me].wait_share, summed, ranks[0].reads, ranks=ranks, rank=me)
        assert "rank 1 waits for data 70% of its time" in text, text
        own = (
            f"On rank 1 the reads took {ONE_STAGE:.2f} s in the training process itself (no workers), "
            f"{ONE_STAGE_SHARE} of it decompr"
        )
        assert own in text, text
        assert "DataLoader workers (num_workers=2 or more)" in text, text
        assert (
            "in the DataLoader workers" not in text and "copying" not in text and "On rank 0" not in text
        ), text
        assert ("what follows is about rank 1" in text) == (me == 0), text


def test_waiting_ranks_that_read_alike_are_spoken_of_together():
    ranks = [
        rank(0, 0.5, stats("decompress"), in_workers=True),
        rank(1, 0.05, stats("decompress")),
        rank(2, 0.3, stats("decompress"), in_workers=True),
        rank(3, 0.2, stats("hash")),
    ]
    text = words(0.05, None, ranks=ranks, rank=1)
    assert "ranks 0, 2 and 3 wait for data more than 10% of their time (up to 50%)" in text, text
    assert f"On ranks 0 and 2 together the reads took {2 * ONE_STAGE:.2f} s in the DataLoader workers" in text
    assert f"On rank 3 the reads took {ONE_STAGE:.2f} s in the training process itself (no workers)" in text
    assert 'verify_checksums="once"' in text and "rank 1 " not in text.split("(rank 3).")[-1], text


def test_a_job_no_rank_of_which_waits_is_not_input_bound():
    text = words(0.05, stats("decompress"), ranks=[rank(0, 0.05, stats("decompress")), rank(1, 0.08)])
    assert "The job is not input-bound" in text and "8% of the time on any rank" in text, text
    assert "the reads took" not in text, text


def test_reads_not_timed_say_that_nothing_was_timed():
    text = words(0.6, ReadStats(batches=7, native_records=56))
    assert "The reads (7 batches) were not timed stage by stage" in text, text
    assert "SDS_LOADER_STAGE_SAMPLING=0" in text and "one run of a batch in 4" in text, text
    assert "Python" not in text, text
    untimed_rank = words(0.01, None, ranks=[rank(0, 0.01), rank(1, 0.5, ReadStats(batches=2))])
    assert "On rank 1 the reads (2 batches) were not timed stage by stage" in untimed_rank, untimed_rank


def test_no_reads_at_all_say_the_wait_is_not_the_readers():
    assert "No read went through sds-loader meanwhile" in words(0.6, ReadStats())
