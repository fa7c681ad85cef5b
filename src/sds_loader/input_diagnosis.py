"""The words of `InputReport.diagnosis()`: input-bound or not, on what, and what would help.

A loop is called input-bound when it waits for data for more than
INPUT_BOUND_SHARE of its time after the first batch: below that, a faster
loader would give back at most that share, and the model is what to speed
up. When it is input-bound, the reads' stage times (summed over threads and
DataLoader workers) say where the reading went, and each stage has its own
remedy, given in the tone `sds-loader inspect` gives its compression advice:
what was measured, then the change, named as it is typed. A job of several
ranks is as input-bound as its slowest rank, and what is said of stages,
workers and remedies is said of the ranks that wait, from their own reads:
every rank's reads summed would speak for the ranks that read most, which
need not be those that wait. Reads that timed no stage say so, rather than
name a stage.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sds_loader.read_stats import ReadStats
from sds_loader.stage_times import DEFAULT_SAMPLING, STAGE_MEANINGS

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sds_loader.rank_share import RankShare

#: Waiting more than this share of the loop's time is input-bound.
INPUT_BOUND_SHARE = 0.10

UNCOMPRESSED = 'StorageOptions(writer_options="group_size:1,uncompressed")'
DEFAULT_TIMED = f"one run of a batch in {DEFAULT_SAMPLING}"


def _remedy(stage: str, reads: ReadStats, in_workers: bool) -> str:
    more = (
        "more DataLoader workers (num_workers=)"
        if in_workers
        else "DataLoader workers (num_workers=2 or more), or more threads for the reader (threads=)"
    )
    remote = reads.fetched_bytes > 0 or reads.fetch_requests > 0
    if stage == "decompress":
        return (
            f"Decompression is CPU work that parallelises: give it {more}; or, where the disk can "
            f"hold it, write the dataset uncompressed ({UNCOMPRESSED}), which turns each record's "
            "decompression into a copy (`sds-loader inspect` says how little zstd saves on noise)"
        )
    if stage == "wait":
        if remote:
            return (
                "The bytes come from object storage: a node cache (cache_dir=) serves every epoch "
                "after the first from local disk, more requests in flight (requests_in_flight=) "
                "hide the round trips, and ShardAwareSampler reads whole chunks a shard at a time"
            )
        return (
            "On local shards that is the copy out of the page cache and its page faults, or the "
            "disk itself where the shards are not cached: for data colder than memory, "
            "ShardAwareSampler shuffles a few shards at a time so that each chunk is read once; "
            f"either way, {more} keep more of it going at once"
        )
    if stage == "hash":
        return (
            'Checking every read\'s hashes costs the time shown: verify_checksums="once" checks '
            "each chunk on its first read in a process and trusts it after"
        )
    if stage == "augment":
        return (
            f"The augmentation chain runs in the reader's threads as each row is decoded: give it {more}; "
            "resampling costs the most of its transforms (docs/augmentation.md gives each one's cost), "
            "and a transform with a probability below 1 costs nothing on the rows it skips"
        )
    if stage == "python":
        return (
            f"Most of it is Python around each read, a fixed cost per batch: larger batches spread it, "
            f"and {more} run it beside the model"
        )
    return f"It is CPU work in the reader: {more} share it out"


def _duration(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds >= 1 else f"{1e3 * seconds:.1f} ms"


def _dominant(reads: ReadStats) -> tuple[str, float, float]:
    """(stage, its share of the reads' time, the reads' total seconds)."""
    seconds = reads.stage_seconds
    total = sum(seconds.values())
    if total <= 0:
        return "", 0.0, 0.0
    stage = max(seconds, key=seconds.__getitem__)
    return stage, seconds[stage] / total, total


def _in_workers(reads: ReadStats, worker_reads: ReadStats | None) -> bool:
    """Whether the DataLoader workers did most of the reading."""
    worker_seconds = sum(worker_reads.stage_seconds.values()) if worker_reads else 0.0
    return worker_seconds > sum(reads.stage_seconds.values()) / 2


def _where_reads_went(who: str, reads: ReadStats, worker_reads: ReadStats | None) -> list[str]:
    """Sentences on `reads` of `who` ("" for this process, or "rank 1", "ranks 1 and 3"):
    the dominant stage, the process that read, the remedy."""
    stage, stage_share, total = _dominant(reads)
    if not stage and reads.batches == 0:
        subject = f"On {who} no read" if who else "No read"
        return [f"{subject} went through sds-loader meanwhile: the wait is not the reader's."]
    subject = f"On {who} the reads" if who else "The reads"
    if not stage:
        return [
            f"{subject} ({reads.batches} batches) were not timed stage by stage: stage timing is "
            "off (SDS_LOADER_STAGE_SAMPLING=0), so nothing says which stage the wait went to; "
            f"left unset, it times {DEFAULT_TIMED}."
        ]
    in_workers = _in_workers(reads, worker_reads)
    where = "the DataLoader workers" if in_workers else "the training process itself (no workers)"
    return [
        f"{subject} took {_duration(total)} in {where}, {100 * stage_share:.0f}% of it "
        f"{STAGE_MEANINGS[stage].split(' (')[0]}.",
        _remedy(stage, reads, in_workers) + ".",
    ]


def _opening(steps: int, wait_share: float, mean_step: float, first_wait: float, rank: int | None) -> str:
    where = "The loop" if rank is None else f"On this rank (rank {rank}) the loop"
    return (
        f"{where} waited for data {100 * wait_share:.0f}% of its time over {steps - 1} steps "
        f"after the first (mean step {1e3 * mean_step:.1f} ms; the first batch took "
        f"{1e3 * first_wait:.0f} ms to arrive)."
    )


def _names(ranks: Sequence[RankShare]) -> str:
    """ "rank 1", "ranks 1 and 3", "ranks 1, 3, 5 and 7", or the first eight and how many more."""
    numbers = [str(rank.rank) for rank in ranks]
    if len(numbers) == 1:
        return f"rank {numbers[0]}"
    if len(numbers) > 8:
        return f"ranks {', '.join(numbers[:8])} and {len(numbers) - 8} more"
    return f"ranks {', '.join(numbers[:-1])} and {numbers[-1]}"


def _finding(rank: RankShare) -> tuple[str, bool, bool]:
    """What decides the words said of a rank's reads: its dominant stage (or why none),
    whether its workers read, whether its bytes came from object storage."""
    reads = rank.reads
    if reads is None:
        return "", False, False
    stage = _dominant(reads)[0] or ("untimed" if reads.batches else "unread")
    remote = reads.fetched_bytes > 0 or reads.fetch_requests > 0
    return stage, _in_workers(reads, rank.worker_reads), remote


def _sum(stats: Sequence[ReadStats | None]) -> ReadStats:
    total = ReadStats()
    for one in stats:
        if one is not None:
            total = total + one
    return total


def _waiting_ranks(ranks: Sequence[RankShare], rank: int | None) -> list[str]:
    """The verdict of a job whose slowest rank waits, and what each waiting rank's reads say.

    Ranks whose reads say the same (stage, process, storage) are spoken of
    together, their reads summed; a rank that does not wait is left out,
    since its layout and its remedy are not what holds the job back.
    """
    waiting = sorted(
        (one for one in ranks if one.wait_share > INPUT_BOUND_SHARE), key=lambda one: -one.wait_share
    )
    if len(waiting) == 1:
        words = [
            f"The job is input-bound: {_names(waiting)} waits for data {100 * waiting[0].wait_share:.0f}% "
            "of its time, and a job goes at the pace of its slowest rank."
        ]
    else:
        words = [
            f"The job is input-bound: {_names(waiting)} wait for data more than "
            f"{100 * INPUT_BOUND_SHARE:.0f}% of their time (up to {100 * waiting[0].wait_share:.0f}%), "
            "and a job goes at the pace of its slowest rank."
        ]
    if rank is not None and all(one.rank != rank for one in waiting):
        words.append(f"This rank does not wait: what follows is about {_names(waiting)}.")
    if any(one.reads is None for one in waiting):
        words.append("Pass stats= (the dataset or reader) to see which stage of the reads dominates.")
        return words
    groups: dict[tuple[str, bool, bool], list[RankShare]] = {}
    for one in waiting:
        groups.setdefault(_finding(one), []).append(one)
    for group in groups.values():
        who = _names(group) + (" together" if len(group) > 1 else "")
        words += _where_reads_went(
            who, _sum([one.reads for one in group]), _sum([one.worker_reads for one in group])
        )
    return words


def diagnose(
    *,
    steps: int,
    wait_share: float,
    mean_step: float,
    first_wait: float,
    ranks: Sequence[RankShare],
    rank: int | None = None,
    reads: ReadStats | None,
    worker_reads: ReadStats | None,
) -> str:
    """One paragraph: the wait share, the verdict, the dominant stage and process, the change.

    `ranks`: every rank's wait and reads, when gathered (`rank` this one);
    the job is as input-bound as its rank that waits most, and what is said
    of stages, processes and remedies is said of the ranks that wait, each
    named, from their own reads.
    """
    if steps < 2:
        return (
            f"Only {steps} batch(es) were delivered: the first batch's wait is start-up "
            "(workers starting, shards opening), so there is no steady wait to judge; watch more steps."
        )
    words = [_opening(steps, wait_share, mean_step, first_wait, rank if ranks else None)]
    share = wait_share
    if ranks:
        worst = max(ranks, key=lambda one: one.wait_share)
        best = min(ranks, key=lambda one: one.wait_share)
        words.append(
            f"Across {len(ranks)} ranks the share runs from {100 * best.wait_share:.0f}% "
            f"(rank {best.rank}) to {100 * worst.wait_share:.0f}% (rank {worst.rank})."
        )
        share = worst.wait_share
    if share <= INPUT_BOUND_SHARE:
        words.append(
            f"{'The job' if ranks else 'It'} is not input-bound: a faster loader would give back at "
            f"most {100 * share:.0f}% of the time{' on any rank' if ranks else ''}; the model's step "
            "is what to speed up."
        )
        return " ".join(words)
    if ranks:
        return " ".join(words + _waiting_ranks(ranks, rank))
    words.append("It is input-bound.")
    if reads is None:
        words.append("Pass stats= (the dataset or reader) to see which stage of the reads dominates.")
        return " ".join(words)
    return " ".join(words + _where_reads_went("", reads, worker_reads))
