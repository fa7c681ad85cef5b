"""What every sds-loader sampler promises: one order per (seed, epoch), dealt to ranks, resumable anywhere.

A sampler here builds the whole epoch as one global sequence of *items* (an
ordinal for an index sampler, a list of ordinals for a batch sampler), and
`EpochSampler` does the rest the same way for all of them:

- **Determinism.** The sequence is a function of ``(seed, epoch)``, the
  dataset and the sampler's arguments, but not of `num_replicas` or `rank`:
  the same in every process, worker and rank, on every world size, and
  after a restart. `set_epoch` moves to another epoch's sequence, as with
  torch's ``DistributedSampler``.
- **Partitions.** With `num_replicas` ranks, each rank takes
  ``ceil(items / num_replicas)`` items (``floor`` with `drop_last`), so every
  rank runs the same number of steps; without `drop_last` the ranks together
  cover every item, and the padding (under `num_replicas` repeated items)
  comes in the last step only. Which positions a rank takes is a function of
  (position, world size), see `sds_loader.samplers.dealing`: the ranks walk
  the sequence together, a round of blocks at a time, so what the world has
  taken after each round is a prefix of the sequence. A batch sampler's
  block is one batch (round-robin); `ShardAwareSampler`'s is a stretch of
  neighbouring runs, which a rank keeps whole. `num_replicas` and `rank`
  default to the world size and rank of ``torch.distributed`` when it is
  initialised, and to one replica otherwise.
- **Resume, on the same world or another.** `state_dict` records the epoch,
  the seed, how many items the world has taken (``consumed``: the ranks move
  in lockstep, so any rank's state is every rank's), the world size that
  took them, and the layout that fixes the sequence. `load_state_dict` on
  a sampler of the same world size continues exactly where the state was
  saved, so the batches after a restore are those an uninterrupted run would
  have made. On another world size (or rank) it continues with what the old
  world had not taken of the epoch, in the sequence's order, dealt out
  afresh over the new ranks: every item of the epoch comes once across the
  old and the new ranks, with at most ``num_replicas - 1`` items of padding.
  Loading refuses a state whose layout differs (another dataset length,
  order version or knob, a batch sampler's `batch_size` among them), since
  its epochs would not match.
- **Workers.** torchdata's ``StatefulDataLoader`` calls both methods (and
  with workers, takes the state as of the batch it last handed out, not as
  of the sampler's read-ahead). A loaded state waits for the first iterator
  that yields: torch's multi-worker DataLoader calls ``iter()`` on its
  sampler twice and discards the first iterator, which therefore takes
  nothing. `sds_loader.samplers.loader_state.sampler_state` takes the
  sampler's state out of a loader's, for a loader with another number of
  workers, which ``StatefulDataLoader`` itself refuses.

A subclass implements `_item_count` and `_epoch_items`, adds its own knobs
to `_layout` so that a state saved under other knobs is refused, and may
give `_deal_block`.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import numpy as np
from torch.utils.data import Sampler

from sds_loader.samplers.dealing import rank_positions, span_positions, spans_left, steps_per_rank

Item = TypeVar("Item")

#: Bumped when the order a given (seed, epoch, layout) produces, or the way it
#: is dealt to ranks, changes, so that a state saved by an older version is
#: refused rather than resumed wrongly.
ORDER_VERSION = 2

#: The keys of a state from `EpochSampler.state_dict`.
STATE_KEYS = ("epoch", "seed", "consumed", "num_replicas", "spans", "layout")

Spans = list[tuple[int, int]]


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


def saved_spans(value: object, items: int) -> Spans:
    """A state's ``spans`` checked: disjoint ``[start, stop)`` stretches of the epoch's `items`."""
    problem = f"spans must be disjoint [start, stop) pairs within the epoch's {items} items"
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ValueError(f"{problem}, not {value!r}")
    spans: Spans = []
    for pair in value:
        if isinstance(pair, str | bytes) or not isinstance(pair, Sequence) or len(pair) != 2:
            raise ValueError(f"{problem}; got {pair!r}")
        start, stop = non_negative_int("span start", pair[0]), non_negative_int("span stop", pair[1])
        if stop < start or stop > items:
            raise ValueError(f"{problem}; got {list(pair)!r}")
        spans.append((start, stop))
    ordered = sorted(spans)
    for (_, stop), (start, _) in zip(ordered, ordered[1:], strict=False):
        if start < stop:
            raise ValueError(f"{problem}; {start} is in two of them")
    return spans


@runtime_checkable
class MixedDatasets(Protocol):
    """What `MixtureSampler` draws from; `sds_loader.torch.Mixture` is what provides it.

    A protocol rather than the class, so that samplers never import the
    datasets they sample: the datasets import the samplers, not the reverse.
    """

    @property
    def datasets(self) -> Sequence[Any]: ...
    @property
    def weights(self) -> Sequence[float]: ...
    @property
    def offsets(self) -> np.ndarray: ...
    @property
    def seed(self) -> int: ...
    @property
    def epoch_size(self) -> int: ...
    def will_need(self, indices: Sequence[int] | np.ndarray) -> int: ...


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
        #: The spans of the epoch the current pass deals out; None for the whole epoch.
        self._spans: Spans | None = None
        #: Items this rank has yielded in the current pass.
        self._yielded = 0
        #: (spans, items this rank has yielded of them) where the next iterator
        #: to yield starts, set by load_state_dict.
        self._pending: tuple[Spans | None, int] | None = None

    # -- what a subclass provides ---------------------------------------------

    def _item_count(self) -> int:
        """Items in one whole epoch, before partitioning (the same every epoch)."""
        raise NotImplementedError

    def _epoch_items(self, rng: np.random.Generator | None) -> Sequence[Item] | np.ndarray:
        """Every item of the epoch in order; `rng` is None when `shuffle` is off."""
        raise NotImplementedError

    def _deal_block(self) -> int:
        """Consecutive items that a rank takes together (see `sds_loader.samplers.dealing`)."""
        return 1

    def _padding_item(self, item: Item) -> Item:
        """The item a rank takes again to even out the ranks' steps (a batch sampler may mark it)."""
        return item

    def _layout(self) -> dict[str, Any]:
        """Everything besides (seed, epoch) that the sequence and its dealing depend on, bar the world."""
        return {
            "kind": type(self).__name__,
            "order_version": ORDER_VERSION,
            "items": self._item_count(),
            "shuffle": self.shuffle,
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
            self._pending = None
            self._spans, self._yielded = None, 0
        self._epoch = epoch

    def __len__(self) -> int:
        return steps_per_rank(self._item_count(), self.num_replicas, self.drop_last)

    def rank_items(self) -> list[Item]:
        """This rank's items of the current epoch, from the start, padded as partitions are."""
        return self._pass_items(None)

    def _pass_items(self, spans: Spans | None) -> list[Item]:
        """This rank's items of a pass over `spans` of the current epoch (None: all of it)."""
        items = self._epoch_items(epoch_generator(self.seed, self._epoch) if self.shuffle else None)
        dealt = np.arange(len(items), dtype=np.int64) if spans is None else span_positions(spans)
        if dealt.size == 0:
            return []
        taken = rank_positions(dealt.size, self.num_replicas, self.rank, self._deal_block(), self.drop_last)
        # Positions past the end are padding: the pass's first items again.
        positions = dealt[taken % dealt.size]
        if isinstance(items, np.ndarray):  # yield Python ints, as torch's samplers do
            chosen: list[Item] = items[positions].tolist()
            return chosen
        chosen_items = [items[position] for position in positions.tolist()]
        for k in np.flatnonzero(taken >= dealt.size).tolist():
            chosen_items[k] = self._padding_item(chosen_items[k])
        return chosen_items

    def __iter__(self) -> Iterator[Item]:
        if self._pending is not None:
            return self._resumed_pass()
        # The pass starts here, not at the first next(): a state taken between
        # iter() and next() already belongs to the new pass.
        self._spans, self._yielded = None, 0
        return self._count_out(self._pass_items(None), 0)

    def _resumed_pass(self) -> Iterator[Item]:
        # A generator, so none of this runs before the first next(): of the
        # iterators made while a state waits (torch's multi-worker DataLoader
        # makes two and throws the first away), the one that yields first
        # takes it. One that yields after it starts the epoch afresh.
        spans, start = self._pending if self._pending is not None else (None, 0)
        self._pending = None
        items = self._pass_items(spans)
        self._spans, self._yielded = spans, min(start, len(items))
        yield from self._count_out(items, self._yielded)

    def _count_out(self, items: list[Item], start: int) -> Iterator[Item]:
        for item in items[start:]:
            self._yielded += 1
            yield item

    def state_dict(self) -> dict[str, Any]:
        """Where the world is: epoch, seed, items all ranks have taken, their number, and the layout."""
        spans, yielded = self._pending if self._pending is not None else (self._spans, self._yielded)
        return {
            "epoch": self._epoch,
            "seed": self.seed,
            "consumed": yielded * self.num_replicas,
            "num_replicas": self.num_replicas,
            "spans": [list(span) for span in ([(0, self._item_count())] if spans is None else spans)],
            "layout": self._layout(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from `state` at the next iteration that yields, on this sampler's world.

        The same epoch and seed; on the world size the state was saved on,
        after the same items of the same pass; on another, over what that
        world had not taken, dealt out afresh to this one.
        """
        name = type(self).__name__
        if not isinstance(state, Mapping) or not set(STATE_KEYS) <= set(state):
            raise ValueError(
                f"{name}.load_state_dict needs a state from {name}.state_dict(), with "
                f"{', '.join(STATE_KEYS)} (a state saved by an sds-loader before 0.3 has none of "
                "consumed, num_replicas and spans: start the epoch afresh)"
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
        world = positive_int("num_replicas", state["num_replicas"])
        consumed = non_negative_int("consumed", state["consumed"])
        spans = saved_spans(state["spans"], self._item_count())
        length = sum(stop - start for start, stop in spans)
        steps, uneven = divmod(consumed, world)
        if uneven or steps > steps_per_rank(length, world, self.drop_last):
            raise ValueError(
                f"consumed must be a whole number of steps of the {world} ranks that saved it, at most "
                f"{world * steps_per_rank(length, world, self.drop_last)} for its spans; got {consumed}"
            )
        whole = spans == [(0, self._item_count())]
        if world == self.num_replicas:
            self._pending = (None if whole else spans, steps)
        else:
            left = spans_left(spans, world, self._deal_block(), self.drop_last, steps)
            self._pending = (left, 0)
        self.seed = non_negative_int("seed", state["seed"])
        self._epoch = non_negative_int("epoch", state["epoch"])

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(items={self._item_count()}, shuffle={self.shuffle}, "
            f"seed={self.seed}, epoch={self._epoch}, num_replicas={self.num_replicas}, "
            f"rank={self.rank}, drop_last={self.drop_last})"
        )
