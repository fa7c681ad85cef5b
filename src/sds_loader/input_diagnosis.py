"""The words of `InputReport.diagnosis()`: input-bound or not, on what, and what would help.

A loop is called input-bound when it waits for data for more than
INPUT_BOUND_SHARE of its time after the first batch: below that, a faster
loader would give back at most that share, and the model is what to speed
up. When it is input-bound, the reads' stage times (summed over threads and
DataLoader workers) say where the reading went, and each stage has its own
remedy, given in the tone `sds-loader inspect` gives its compression advice:
what was measured, then the change, named as it is typed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sds_loader.stage_times import STAGE_MEANINGS

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sds_loader.read_stats import ReadStats

#: Waiting more than this share of the loop's time is input-bound.
INPUT_BOUND_SHARE = 0.10

UNCOMPRESSED = 'StorageOptions(writer_options="group_size:1,uncompressed")'


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


def diagnose(
    *,
    steps: int,
    wait_share: float,
    mean_step: float,
    first_wait: float,
    ranks: Sequence[tuple[int, float]],
    reads: ReadStats | None,
    worker_reads: ReadStats | None,
) -> str:
    """One paragraph: the wait share, the verdict, the dominant stage and process, the change.

    `ranks`: (rank, its wait share) of every rank, when gathered; the job is
    as input-bound as its rank that waits most.
    """
    if steps < 2:
        return (
            f"Only {steps} batch(es) were delivered: the first batch's wait is start-up "
            "(workers starting, shards opening), so there is no steady wait to judge; watch more steps."
        )
    share = wait_share
    words = [
        f"The loop waited for data {100 * share:.0f}% of its time over {steps - 1} steps "
        f"after the first (mean step {1e3 * mean_step:.1f} ms; the first batch took "
        f"{1e3 * first_wait:.0f} ms to arrive)."
    ]
    if ranks:
        worst = max(ranks, key=lambda rank: rank[1])
        best = min(ranks, key=lambda rank: rank[1])
        words.append(
            f"Across {len(ranks)} ranks the share runs from {100 * best[1]:.0f}% "
            f"(rank {best[0]}) to {100 * worst[1]:.0f}% (rank {worst[0]})."
        )
        share = worst[1]
    if share <= INPUT_BOUND_SHARE:
        words.append(
            f"It is not input-bound: a faster loader would give back at most {100 * share:.0f}% of "
            "the time; the model's step is what to speed up."
        )
        return " ".join(words)
    words.append("It is input-bound.")
    if reads is None:
        words.append("Pass stats= (the dataset or reader) to see which stage of the reads dominates.")
        return " ".join(words)
    stage, stage_share, total = _dominant(reads)
    if not stage:
        words.append(
            "The reads recorded no stage times (SDS_LOADER_STAGE_SAMPLING=0, or no read went "
            "through sds-loader): the wait is not the reader's."
        )
        return " ".join(words)
    worker_seconds = sum(worker_reads.stage_seconds.values()) if worker_reads else 0.0
    in_workers = worker_seconds > total / 2
    where = "the DataLoader workers" if in_workers else "the training process itself (no workers)"
    words.append(
        f"The reads took {_duration(total)} in {where}, {100 * stage_share:.0f}% of it "
        f"{STAGE_MEANINGS[stage].split(' (')[0]}."
    )
    words.append(_remedy(stage, reads, in_workers) + ".")
    return " ".join(words)
