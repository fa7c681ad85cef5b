"""Cut a dataset's ordinals into stretches, one per Ray read task, along its shards.

SDS numbers records shard after shard, so a contiguous range of ordinals is a
stretch of shards: a task that reads one opens few shards and reads their
chunks in order. With fewer tasks wanted than shards, stretches are cut at
the shard boundaries nearest to equal shares; with more, each shard is split
into pieces, as many for each shard as its share of the records (every shard
at least one). The plan holds two integers a task whatever the dataset's
length, so the driver's memory does not grow with its record count.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def plan(run_starts: np.ndarray, count: int, tasks: int) -> list[tuple[int, int]]:
    """Ordinal ranges covering ``[0, count)`` in order, about `tasks` of them.

    `run_starts` holds the first ordinal of each run of records stored in one
    shard, ascending (the shard table's ``starts`` less its sentinel).
    Never more ranges than records, never an empty one.
    """
    if count <= 0:
        return []
    tasks = max(1, min(int(tasks), count))
    starts = np.unique(np.asarray(run_starts, dtype=np.int64))
    starts = starts[(starts >= 0) & (starts < count)]
    if starts.size == 0 or starts[0] != 0:
        starts = np.concatenate([[0], starts])
    bounds = np.append(starts, count)
    lengths = np.diff(bounds)
    runs = lengths.size
    if tasks <= runs:
        # Cut at the run boundaries nearest to equal shares of the records.
        wanted = np.arange(1, tasks) * (count / tasks)
        inner = bounds[1:-1]
        nearest = np.searchsorted(inner, wanted)
        left = inner[np.clip(nearest - 1, 0, inner.size - 1)] if inner.size else inner
        right = inner[np.clip(nearest, 0, inner.size - 1)] if inner.size else inner
        cuts = np.where(np.abs(wanted - left) <= np.abs(right - wanted), left, right)
        edges = np.unique(np.concatenate([[0], cuts, [count]])).tolist()
    else:
        # Every run gets a piece, then the rest by largest remainder of its share.
        pieces = np.ones(runs, dtype=np.int64)
        share = lengths * ((tasks - runs) / count)
        pieces += np.floor(share).astype(np.int64)
        left_over = tasks - int(pieces.sum())
        if left_over > 0:
            pieces[np.argsort(-(share - np.floor(share)), kind="stable")[:left_over]] += 1
        pieces = np.minimum(pieces, lengths)
        # A run cannot hold more pieces than records: give the rest to the
        # runs with the longest pieces that can still be split.
        while (left_over := tasks - int(pieces.sum())) > 0:
            room = np.flatnonzero(pieces < lengths)
            longest = room[np.argsort(-(lengths[room] / pieces[room]), kind="stable")[:left_over]]
            pieces[longest] += 1
        edges = [0]
        for first, length, parts in zip(starts.tolist(), lengths.tolist(), pieces.tolist(), strict=True):
            edges.extend(first + (length * k) // parts for k in range(1, parts + 1))
        edges = sorted(set(edges))
    return [(lo, hi) for lo, hi in zip(edges[:-1], edges[1:], strict=True) if hi > lo]


def files_of(
    first: int, stop: int, run_starts: np.ndarray, run_files: np.ndarray, paths: Sequence[str]
) -> tuple[str, ...]:
    """The shard files holding ordinals ``[first, stop)``, in the order they are met."""
    lo = int(np.searchsorted(run_starts, first, side="right")) - 1
    hi = int(np.searchsorted(run_starts, stop, side="left"))
    seen: dict[str, None] = {}
    for index in run_files[max(lo, 0) : max(hi, lo + 1)].tolist():
        seen.setdefault(paths[int(index)], None)
    return tuple(seen)
