"""Batches that draw each member of a `Mixture` in proportion to its weight.

A weighted mixture is usually sampled record by record (each draw picks a
member at random, then a record of it). That leaves a batch's make-up to
chance: at a 70/30 weighting a batch of 256 holds 179 +- 7 records of the
first member, and a member is drawn with replacement, so some records of a
small member come twice before others come once. `MixtureSampler` fixes
both counts instead and keeps the randomness where it helps:

1. **Per epoch.** Member k gets ``weight_k * epoch_size`` records, rounded
   (each count within 1 of its share, the counts summing to `epoch_size`).
2. **Per batch.** Each batch of `batch_size` holds each member's share of
   it, within one record; the rounding is carried from batch to batch (the
   member furthest behind its share takes the next spare place), so no
   member runs ahead over the epoch either.
3. **Inside a member.** Each member's records are drawn from a stream of
   `ShardAwareSampler` permutations of that member (runs of neighbouring
   records, shuffled and mixed; the same `run_length` and `runs_mixed`),
   one after another: without replacement until the member is exhausted,
   then from a new permutation. The stream runs on across epochs, so a large
   member drawn below its size is covered over several epochs before any
   record repeats, and a small one drawn above it repeats each record as
   evenly as its share allows.

It is a batch sampler (``DataLoader(mixture, batch_sampler=sampler)``): a
batch lists member 0's records, then member 1's, and so on, so each
member's part is one stretch of the batch's tensors, which the member reads
into directly (see `sds_loader.torch.mixture`). Ranks take whole batches,
in turn.
A batch split into micro-batches should be split with that order in mind.

Everything that `sds_loader.samplers.contract` promises holds: one order per
(`seed`, epoch), `set_epoch`, `num_replicas`/`rank` partitions, resume
through `state_dict()`/`load_state_dict()` (and torchdata's
``StatefulDataLoader``), exact on the same world size and on another one
every batch once, with its shares. The member streams are seeded by (`seed`, member,
pass through the member), not by the epoch, which is what lets them run on.

`readahead` (default: two batches of records) announces the records up to
that many past the current batch to their members' `will_need` as each batch
is handed out, as `ShardAwareSampler` does for one dataset.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from sds_loader.samplers.contract import EpochSampler, MixedDatasets, non_negative_int, positive_int
from sds_loader.samplers.shard_aware import ShardAwareSampler


def batch_quotas(weights: np.ndarray, sizes: list[int]) -> np.ndarray:
    """Records of each member (columns) in each batch (rows) of `sizes`.

    Each entry is its share ``weights[k] * size`` rounded down or up, each row
    sums to its batch's size, and the rounding is carried: a member's lag
    (its share so far less its records so far) decides who takes a batch's
    spare places. That keeps every lag below one record, so each member's
    total over the epoch is its share of the epoch within one record too.
    The bound is checked, not proven: the tests try hundreds of random
    weightings of two to five members against batch and epoch sizes.
    Rounding each batch on its own (largest remainders, no carry) would cut
    the same member short in every batch: at 70/30, 179 of 179.2 records a
    batch, six records short after 32 batches.
    """
    members = weights.size
    quotas = np.zeros((len(sizes), members), dtype=np.int64)
    lag = np.zeros(members)
    for batch, size in enumerate(sizes):
        shares = weights * size
        counts = np.floor(shares).astype(np.int64)
        fractions = shares - counts
        spare = size - int(counts.sum())
        if spare > 0:
            # A member whose share is whole takes no spare place, however far behind.
            score = np.where(fractions > 0, lag + fractions, -np.inf)
            counts[np.argsort(-score, kind="stable")[:spare]] += 1
        lag += shares - counts
        quotas[batch] = counts
    return quotas


class MixtureSampler(EpochSampler[list[int]]):
    """A batch sampler over a `sds_loader.torch.Mixture`: each batch holds each member by its weight.

    ``DataLoader(mixture, batch_sampler=MixtureSampler(mixture, 256),
    collate_fn=collate)``. An epoch is `epoch_size` records (default: the
    mixture's) in batches of `batch_size`, the last one shorter unless
    `drop_last`; `seed` defaults to the mixture's. See this module's docstring
    for how records are drawn, and `sds_loader.samplers.contract` for
    determinism, partitions (in whole batches), `set_epoch` and resume.
    """

    def __init__(
        self,
        mixture: MixedDatasets,
        batch_size: int,
        *,
        shuffle: bool = True,
        seed: int | None = None,
        epoch_size: int | None = None,
        num_replicas: int | None = None,
        rank: int | None = None,
        drop_last: bool = False,
        run_length: int = 16,
        runs_mixed: int = 16,
        readahead: int | None = None,
    ) -> None:
        if not isinstance(mixture, MixedDatasets):
            raise TypeError(
                f"MixtureSampler draws from a sds_loader.torch.Mixture, not a {type(mixture).__name__}; "
                "for one dataset use ShardAwareSampler"
            )
        super().__init__(
            shuffle=shuffle,
            seed=mixture.seed if seed is None else seed,
            num_replicas=num_replicas,
            rank=rank,
            drop_last=drop_last,
        )
        self.batch_size = positive_int("batch_size", batch_size)
        self.epoch_size = positive_int("epoch_size", mixture.epoch_size if epoch_size is None else epoch_size)
        self.run_length = positive_int("run_length", run_length)
        self.runs_mixed = positive_int("runs_mixed", runs_mixed)
        self.readahead = non_negative_int(
            "readahead", 2 * self.batch_size if readahead is None else readahead
        )
        self._mixture = mixture
        self._weights = np.asarray(mixture.weights, dtype=np.float64)
        self._offsets = np.asarray(mixture.offsets, dtype=np.int64)
        # One ShardAwareSampler per member, for its runs and its permutations only.
        self._members = [
            ShardAwareSampler(
                dataset,
                shuffle=shuffle,
                num_replicas=1,
                rank=0,
                run_length=self.run_length,
                runs_mixed=self.runs_mixed,
                readahead=0,
            )
            for dataset in mixture.datasets
        ]
        whole, rest = divmod(self.epoch_size, self.batch_size)
        sizes = [self.batch_size] * whole + ([rest] if rest else [])
        self._quotas = batch_quotas(self._weights, sizes)
        if drop_last and rest:
            self._quotas = self._quotas[:-1]
        self._quotas.setflags(write=False)

    @property
    def quotas(self) -> np.ndarray:
        """Records of each member (columns) in each batch of the epoch (rows), read-only."""
        return self._quotas

    @property
    def member_counts(self) -> np.ndarray:
        """Records each member contributes to one epoch (before partitioning across ranks)."""
        counts: np.ndarray = self._quotas.sum(axis=0)
        return counts

    def _item_count(self) -> int:
        return int(self._quotas.shape[0])

    def _layout(self) -> dict[str, Any]:
        return {
            **super()._layout(),
            "batch_size": self.batch_size,
            "epoch_size": self.epoch_size,
            "weights": [float(w) for w in self._weights],
            "members": [int(n) for n in np.diff(self._offsets)],
            "runs": [member.runs for member in self._members],
            "run_length": self.run_length,
            "runs_mixed": self.runs_mixed,
        }

    def member_stream(self, member: int, start: int, count: int) -> np.ndarray:
        """Records `start` to ``start + count`` of member `member`'s stream, as its own ordinals.

        The stream is pass 0, pass 1, ... through the member, each pass a
        `ShardAwareSampler` order seeded by (seed, member, pass), or the
        member's own order without `shuffle`.
        """
        sampler = self._members[member]
        length = int(self._offsets[member + 1] - self._offsets[member])
        pieces = []
        stop = start + count
        for number in range(start // length, -(-stop // length)):
            if self.shuffle:
                seeds = np.random.SeedSequence(self.seed, spawn_key=(member, number))
                rng = np.random.Generator(np.random.PCG64(seeds))
                order = np.asarray(sampler._epoch_items(rng), dtype=np.int64)
            else:
                order = np.arange(length, dtype=np.int64)
            first = number * length
            pieces.append(order[max(start, first) - first : min(stop, first + length) - first])
        return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)

    def _epoch_items(self, rng: np.random.Generator | None) -> list[list[int]]:
        del rng  # the member streams carry their own seeds
        counts = self.member_counts
        streams = [
            self._offsets[member] + self.member_stream(member, self._epoch * int(count), int(count))
            for member, count in enumerate(counts.tolist())
        ]
        bounds = np.vstack([np.zeros((1, counts.size), dtype=np.int64), np.cumsum(self._quotas, axis=0)])
        batches = []
        for batch in range(self._quotas.shape[0]):
            parts = [streams[k][bounds[batch, k] : bounds[batch + 1, k]] for k in range(counts.size)]
            batches.append(np.concatenate(parts).tolist())
        return batches

    def _count_out(self, items: list[list[int]], start: int) -> Iterator[list[int]]:
        if self.readahead == 0:
            yield from super()._count_out(items, start)
            return
        # As each batch is handed out, announce every record up to `readahead`
        # past its end that has not been announced yet.
        ends = np.cumsum([len(batch) for batch in items[start:]], dtype=np.int64)
        flat: list[int] = [index for batch in items[start:] for index in batch]
        announced = 0
        for position, batch in enumerate(items[start:]):
            until = min(len(flat), int(ends[position]) + self.readahead)
            if until > announced:
                self._mixture.will_need(flat[announced:until])
                announced = until
            self._yielded += 1
            yield batch

    def __repr__(self) -> str:
        return (
            f"{super().__repr__()[:-1]}, batch_size={self.batch_size}, epoch_size={self.epoch_size}, "
            f"weights={[round(float(w), 4) for w in self._weights]}, run_length={self.run_length}, "
            f"runs_mixed={self.runs_mixed}, readahead={self.readahead})"
        )
