"""A seeded order for each pass over a dataset that keeps shard locality.

Ray's `random_shuffle` moves every row through an all-to-all exchange: a
uniform permutation of the dataset, at the price of writing every block to
the object store again and holding a pass's worth of it at once. A local
shuffle here costs nothing of that: the read tasks (each a stretch of a few
shards) run in a permuted order, and each task reads its rows in a permuted
order of its own, so a task still touches only its shards. Both orders are
functions of (seed, epoch) and the stretch alone, so every process that
plans or runs a pass agrees on them.

What it does not randomise: rows of one stretch stay together within the
pass (a batch draws from the one or two tasks running at once, never from the
whole dataset), and which rows share a stretch is fixed by the plan. Where a
model must not see rows of one shard side by side, follow the read with
``randomize_block_order`` and a ``local_shuffle_buffer_size`` at iteration,
or with ``random_shuffle``.
"""

from __future__ import annotations

import numpy as np


def task_order(tasks: int, *, seed: int, epoch: int) -> np.ndarray:
    """The order the read tasks of pass `epoch` are handed to Ray in."""
    return np.random.default_rng([seed, epoch]).permutation(tasks)


def rows_of(first: int, stop: int, *, seed: int | None, epoch: int) -> np.ndarray:
    """The ordinals of stretch ``[first, stop)`` in the order its task reads them (int64).

    In ordinal order without a seed; else a permutation of the stretch drawn
    from (seed, epoch, first), so each stretch of a pass has its own.
    """
    ordinals = np.arange(first, stop, dtype=np.int64)
    if seed is None:
        return ordinals
    return np.random.default_rng([seed, epoch, first]).permutation(ordinals)
