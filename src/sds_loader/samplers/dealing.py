"""How an epoch's global sequence is dealt out to ranks, and what a world of ranks has taken of it.

An epoch is one sequence of items (records, or batches), the same whatever
the world size. A world of `num_replicas` ranks takes it in *steps*: at each
step every rank takes its next item, so after `steps` steps the world has
taken ``steps * num_replicas`` items, the same number on every rank. Which
positions a rank takes is a function of (position, world size) alone:

- Every rank takes ``ceil(length / num_replicas)`` items (``floor`` with
  `drop_last`). Without `drop_last` the sequence is padded to that many
  by repeating its first items; with it, its last items are left undealt.
- Up to its last step, a rank takes whole *blocks* of `block` consecutive
  positions (the items that belong together: a stretch of neighbouring
  records), the blocks dealt in rounds: round t gives rank r the block
  ``t * num_replicas + r``. So the world walks the sequence from its start,
  a round at a time: after each whole round what it has taken is a prefix of
  the sequence, whatever the world size. What is left when a rank has fewer
  than `block` items to go before its last step is cut evenly, a contiguous
  piece to each rank, in rank order.
- The last step deals the sequence's last ``num_replicas`` positions one to
  each rank. The padding lies there, so no rank takes a repeated item
  before the world has taken every item of the sequence once.

With ``block=1`` (batches) that is round-robin: step s takes positions
``s * num_replicas`` to ``(s + 1) * num_replicas``, a prefix of the sequence
at every step.

A resume on another world size continues from *what is left*: the positions
that the old world's steps did not take, which the new world deals out
afresh as above. They come in the sequence's order from the first block no
rank had begun, so the blocks of the rest of the epoch stay whole (a block
cut in two mixes two stretches' records); the remainders of the blocks
the old ranks were partway through (at most one block per old rank) follow
them, at the end. A pass over what is left is described by its *spans*,
``[start, stop)`` stretches of the epoch's sequence, in the order the pass
takes them; the whole epoch is one span.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def steps_per_rank(length: int, num_replicas: int, drop_last: bool) -> int:
    """Items each rank takes from a sequence of `length` items."""
    return length // num_replicas if drop_last else -(-length // num_replicas)


def rank_positions(length: int, num_replicas: int, rank: int, block: int, drop_last: bool) -> np.ndarray:
    """The positions `rank` takes, in the order it takes them (positions past `length` are padding)."""
    steps = steps_per_rank(length, num_replicas, drop_last)
    if steps == 0:
        return np.zeros(0, dtype=np.int64)
    before = steps - 1  # items before the last step
    rounds, rest = divmod(before, block)
    in_rounds = rounds * num_replicas * block
    whole = np.arange(rounds, dtype=np.int64)[:, None] * (num_replicas * block) + rank * block
    pieces = [
        (whole + np.arange(block, dtype=np.int64)[None, :]).reshape(-1),
        in_rounds + rank * rest + np.arange(rest, dtype=np.int64),
        np.array([num_replicas * before + rank], dtype=np.int64),
    ]
    return np.concatenate(pieces)


def taken_positions(length: int, num_replicas: int, block: int, drop_last: bool, steps: int) -> np.ndarray:
    """The positions under `length` that a world of `num_replicas` has taken after `steps` steps."""
    taken = np.concatenate(
        [np.zeros(0, dtype=np.int64)]
        + [
            rank_positions(length, num_replicas, rank, block, drop_last)[:steps]
            for rank in range(num_replicas)
        ]
    )
    return taken[taken < length]


def span_positions(spans: Sequence[tuple[int, int]]) -> np.ndarray:
    """The epoch positions that `spans` cover, in order."""
    return np.concatenate(
        [np.zeros(0, dtype=np.int64)] + [np.arange(start, stop, dtype=np.int64) for start, stop in spans]
    )


def spans_of(positions: np.ndarray) -> list[tuple[int, int]]:
    """`positions` as the fewest ``[start, stop)`` spans that list them in order."""
    if positions.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(positions) != 1) + 1
    starts = positions[np.concatenate([[0], breaks])]
    stops = positions[np.concatenate([breaks - 1, [positions.size - 1]])] + 1
    return [(int(a), int(b)) for a, b in zip(starts.tolist(), stops.tolist(), strict=True)]


def spans_left(
    spans: Sequence[tuple[int, int]], num_replicas: int, block: int, drop_last: bool, steps: int
) -> list[tuple[int, int]]:
    """What is left of a pass over `spans` after `steps` steps of a world of `num_replicas`.

    From the first block that no rank had begun, in order, then what is left
    before it: the rest of the pass keeps its blocks where they were.
    """
    positions = span_positions(spans)
    taken = taken_positions(positions.size, num_replicas, block, drop_last, steps)
    left = np.ones(positions.size, dtype=bool)
    left[taken] = False
    begun = -(-(int(taken.max()) + 1) // block) * block if taken.size else 0
    order = np.concatenate([np.flatnonzero(left[begun:]) + begun, np.flatnonzero(left[:begun])])
    return spans_of(positions[order])
