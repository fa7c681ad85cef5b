"""What every sds-loader sampler promises: one order per (seed, epoch), split across ranks, resumable.

A sampler here builds the whole epoch as a sequence of *items* (an ordinal
for an index sampler, a list of ordinals for a batch sampler), and
`EpochSampler` does the rest the same way for all of them:

- **Determinism.** The order is a function of ``(seed, epoch)`` and the
  dataset's layout only: the same in every process, worker and rank, and
  after a restart. `set_epoch` moves to another epoch's order, as with
  torch's ``DistributedSampler``.
- **Partitions.** With `num_replicas` ranks, each rank takes
  ``ceil(items / num_replicas)`` items (``floor`` with `drop_last`), so every
  rank runs the same number of steps; the epoch is padded by repeating its
  first items, and without `drop_last` the ranks together cover every item.
  Unlike ``DistributedSampler``, which deals items out round-robin, a rank
  takes one contiguous slice of the epoch: a sampler whose neighbouring
  items share a region of a shard keeps that locality on every rank.
  `num_replicas` and `rank` default to the world size and rank of
  ``torch.distributed`` when it is initialised, and to one replica otherwise.
- **Exact resume.** `state_dict` records the epoch, the seed and how many
  items this rank has yielded; a sampler given it by `load_state_dict`
  rebuilds the same epoch and continues after those items, so the batches
  after a restore are the batches an uninterrupted run would have made.
  torchdata's ``StatefulDataLoader`` calls both (and with workers, takes the
  state as of the batch it last handed out, not as of the sampler's read-ahead).
  Loading a state refuses a sampler whose layout differs (another dataset
  length, replica count, rank or knob), since its epochs would not match.

A subclass implements `_item_count` and `_epoch_items`, and adds its own
knobs to `_layout` so that a state saved under other knobs is refused.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar

import numpy as np
from torch.utils.data import Sampler

Item = TypeVar("Item")

#: Bumped when the order a given (seed, epoch, layout) produces changes, so
#: that a state saved by an older version is refused rather than resumed wrongly.
ORDER_VERSION = 1


def positive_int(name: str, value: object) -> int:
    """`value` as an int when it is one and at least 1 (a sampler's sizes), else ValueError."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be a positive integer, not {value!r}")
    return operator.index(value)


def non_negative_int(name: str, value: object) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, not a bool")
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}") from None
    if number < 0:
        raise ValueError(f"{name} must be zero or more, not {number}")
    return number


def default_replicas(num_replicas: int | None, rank: int | None) -> tuple[int, int]:
    """(num_replicas, rank), each taken from torch.distributed when None and it is initialised."""
    import torch.distributed as dist

    initialised = dist.is_available() and dist.is_initialized()
    if num_replicas is None:
        num_replicas = dist.get_world_size() if initialised else 1
    if rank is None:
        rank = dist.get_rank() if initialised else 0
    num_replicas = non_negative_int("num_replicas", num_replicas)
    rank = non_negative_int("rank", rank)
    if num_replicas < 1:
        raise ValueError("num_replicas must be at least 1")
    if rank >= num_replicas:
        raise ValueError(
            f"rank {rank} is out of range for {num_replicas} replicas; ranks run from 0 to {num_replicas - 1}"
        )
    return num_replicas, rank


def epoch_generator(seed: int, epoch: int) -> np.random.Generator:
    """The random stream of one epoch: the same for the same (seed, epoch) on every machine."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, epoch])))


def rank_slice(count: int, num_replicas: int, rank: int, drop_last: bool) -> tuple[int, range]:
    """(items per rank, positions in the padded epoch that `rank` takes).

    Positions past `count` wrap around to the epoch's first items, which is
    how DistributedSampler pads; `drop_last` instead shortens every rank so
    that none needs padding.
    """
    per_rank = count // num_replicas if drop_last else -(-count // num_replicas)
    return per_rank, range(rank * per_rank, (rank + 1) * per_rank)


class EpochSampler(Sampler[Item], Generic[Item]):
    """Base of sds-loader's samplers: the shared determinism, partition and resume contract.

    See this module's docstring for the contract. Subclasses call
    ``super().__init__(shuffle=..., seed=..., num_replicas=..., rank=...,
    drop_last=...)`` and implement `_item_count` and `_epoch_items`.
    """

    def __init__(
        self,
        *,
        shuffle: bool = True,
        seed: int = 0,
        num_replicas: int | None = None,
        rank: int | None = None,
        drop_last: bool = False,
    ) -> None:
        self.shuffle = bool(shuffle)
        self.seed = non_negative_int("seed", seed)
        self.num_replicas, self.rank = default_replicas(num_replicas, rank)
        self.drop_last = bool(drop_last)
        self._epoch = 0
        #: Items this rank has yielded in the current epoch.
        self._yielded = 0
        #: Where the next iterator starts, set by load_state_dict.
        self._resume_at: int | None = None

    # -- what a subclass provides ---------------------------------------------

    def _item_count(self) -> int:
        """Items in one whole epoch, before partitioning (the same every epoch)."""
        raise NotImplementedError

    def _epoch_items(self, rng: np.random.Generator | None) -> Sequence[Item] | np.ndarray:
        """Every item of the epoch in order; `rng` is None when `shuffle` is off."""
        raise NotImplementedError

    def _layout(self) -> dict[str, Any]:
        """Everything besides (seed, epoch) that the order depends on."""
        return {
            "kind": type(self).__name__,
            "order_version": ORDER_VERSION,
            "items": self._item_count(),
            "shuffle": self.shuffle,
            "num_replicas": self.num_replicas,
            "rank": self.rank,
            "drop_last": self.drop_last,
        }

    # -- the contract -----------------------------------------------------------

    @property
    def epoch(self) -> int:
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Use epoch `epoch`'s order from the next iteration on.

        A position restored by `load_state_dict` belongs to the epoch it was
        saved in; moving to another epoch discards it, and setting the same
        epoch again keeps it, so the usual ``set_epoch(e)`` at the top of a
        resumed loop is harmless.
        """
        epoch = non_negative_int("epoch", epoch)
        if epoch != self._epoch:
            self._resume_at = None
        self._epoch = epoch

    def __len__(self) -> int:
        return rank_slice(self._item_count(), self.num_replicas, self.rank, self.drop_last)[0]

    def rank_items(self) -> list[Item]:
        """This rank's items of the current epoch, from the start, padded as partitions are."""
        items = self._epoch_items(epoch_generator(self.seed, self._epoch) if self.shuffle else None)
        count = len(items)
        if count == 0:
            return []
        _, positions = rank_slice(count, self.num_replicas, self.rank, self.drop_last)
        if isinstance(items, np.ndarray):  # yield Python ints, as torch's samplers do
            chosen: list[Item] = items[np.arange(positions.start, positions.stop) % count].tolist()
            return chosen
        if positions.stop <= count:
            return list(items[positions.start : positions.stop])
        return [items[position % count] for position in positions]

    def __iter__(self) -> Iterator[Item]:
        # The pass starts here, not at the first next(): a state taken between
        # iter() and next() already belongs to the new pass.
        start = self._resume_at or 0
        self._resume_at = None
        items = self.rank_items()
        self._yielded = min(start, len(items))
        return self._count_out(items, self._yielded)

    def _count_out(self, items: list[Item], start: int) -> Iterator[Item]:
        for item in items[start:]:
            self._yielded += 1
            yield item

    def state_dict(self) -> dict[str, Any]:
        """Where this rank is: epoch, seed, items yielded, and the layout that fixes the order."""
        yielded = self._resume_at if self._resume_at is not None else self._yielded
        return {"epoch": self._epoch, "seed": self.seed, "yielded": yielded, "layout": self._layout()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from `state` at the next iteration: same epoch, same seed, after the same items."""
        if not isinstance(state, Mapping) or not {"epoch", "seed", "yielded", "layout"} <= set(state):
            raise ValueError(
                f"{type(self).__name__}.load_state_dict needs a state from "
                f"{type(self).__name__}.state_dict(), with epoch, seed, yielded and layout"
            )
        layout = self._layout()
        saved = dict(state["layout"])
        if saved != layout:
            differing = sorted(k for k in layout.keys() | saved.keys() if layout.get(k) != saved.get(k))
            details = ", ".join(f"{k}: saved {saved.get(k)!r}, now {layout.get(k)!r}" for k in differing)
            raise ValueError(
                f"this state was saved by a sampler with another layout ({details}); resume with "
                "the same dataset and sampler arguments, or start the epoch afresh"
            )
        self.seed = non_negative_int("seed", state["seed"])
        self._epoch = non_negative_int("epoch", state["epoch"])
        self._resume_at = non_negative_int("yielded", state["yielded"])
        self._yielded = self._resume_at

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(items={self._item_count()}, shuffle={self.shuffle}, "
            f"seed={self.seed}, epoch={self._epoch}, num_replicas={self.num_replicas}, "
            f"rank={self.rank}, drop_last={self.drop_last})"
        )
