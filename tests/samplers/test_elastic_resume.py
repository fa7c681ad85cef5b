"""Resuming an epoch on another number of ranks or workers: every record once, nothing read twice.

For each sampler an epoch is started on N ranks, saved after k batches,
resumed on N' ranks and finished, for N, N' in {1, 2, 3, 4, 8} and k from 0
to the last batch: across the old and the new ranks every ordinal (or
batch) of the epoch comes exactly once, plus padding of at most N' - 1
(N - 1 when the old ranks had finished the epoch). On the same world size
the resume is exact. Through torchdata's StatefulDataLoader the same holds
for another number of workers, with the sampler's state taken out of the
loader's.
"""

from __future__ import annotations

import torch_required  # noqa: F401 - skips this module without torch

import functools
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
import signal_dataset as sds
from sds_factory import capture, write_dataset

from sds_loader.samplers import (
    LengthBucketSampler,
    MixtureSampler,
    ShardAwareSampler,
    sampler_state,
)
from sds_loader.torch import Mixture, SDSTorchDataset, collate

WORLDS = (1, 2, 3, 4, 8)
RECORDS = 150
#: Records a ShardAwareSampler batch holds; its stretches are run_length 2 * runs_mixed 3.
BATCH = 4
EPOCH = 1


def indexed(ordinal: int, *, base: int = 0, samples: int = 4) -> sds.Record:
    record = capture(base + ordinal, channels=1, samples=samples)
    return sds.Record(
        id=record.id, fields=record.fields, metadata={**record.metadata, "index": base + ordinal}
    )


def varied(ordinal: int) -> sds.Record:
    """Lengths spread 4 to 40 samples, in no order related to the ordinal, for length buckets."""
    return indexed(ordinal, samples=4 + (ordinal * 37) % 37)


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("elastic")
    paths = {
        "records": (RECORDS, indexed, 40),
        "lengths": (90, varied, 30),
        "second": (40, functools.partial(indexed, base=1000), 16),
    }
    for name, (count, make, per_shard) in paths.items():
        write_dataset(base / name, count, make, records_per_shard=per_shard)
    return {name: str(base / name) for name in paths}


# -- the samplers under test, and what they deliver ---------------------------------


def shard_aware(roots: dict[str, str], **kwargs: Any) -> Callable[[int, int], ShardAwareSampler]:
    dataset = SDSTorchDataset(roots["records"])
    return lambda world, rank: ShardAwareSampler(
        dataset, seed=3, run_length=2, runs_mixed=3, num_replicas=world, rank=rank, **kwargs
    )


def length_bucket(roots: dict[str, str], **kwargs: Any) -> Callable[[int, int], LengthBucketSampler]:
    return lambda world, rank: LengthBucketSampler(
        roots["lengths"], 4, axis="a1", seed=3, pool_batches=4, num_replicas=world, rank=rank, **kwargs
    )


def mixture(roots: dict[str, str]) -> Mixture:
    members = [SDSTorchDataset(roots[name], targets={"index": "index"}) for name in ("records", "second")]
    return Mixture(members, [0.7, 0.3])  # type: ignore[arg-type]


def mixture_sampler(roots: dict[str, str], **kwargs: Any) -> Callable[[int, int], MixtureSampler]:
    mixed = mixture(roots)
    return lambda world, rank: MixtureSampler(
        mixed, 6, seed=3, run_length=2, runs_mixed=3, num_replicas=world, rank=rank, **kwargs
    )


def bounded_buckets(roots: dict[str, str]) -> Callable[[int, int], LengthBucketSampler]:
    """Buckets by boundary (the longest records cut to the largest), every batch filled to full size."""
    return length_bucket(roots, boundaries=(8, 16, 32), fill="mask")


SAMPLERS = {
    "shard-aware": shard_aware,
    "length-bucket": length_bucket,
    "length-bucket-bounded": bounded_buckets,
    "mixture": mixture_sampler,
}


def units(items: Sequence[Any]) -> list[Any]:
    """What a rank delivered, one hashable unit each: an ordinal, or a batch as a tuple."""
    return [tuple(item) if isinstance(item, list) else item for item in items]


def per_batch(sampler: Any) -> int:
    """Items of one DataLoader batch: BATCH records for an index sampler, one batch for a batch sampler."""
    return BATCH if isinstance(sampler, ShardAwareSampler) else 1


def take(sampler: Any, count: int) -> list[Any]:
    iterator = iter(sampler)
    return [next(iterator) for _ in range(count)]


def interrupted(make: Callable[[int, int], Any], world: int, batches: int) -> tuple[list[list[Any]], dict]:
    """Each of `world` ranks' first `batches` batches of the epoch, and the state they save."""
    ranks = [make(world, rank) for rank in range(world)]
    heads = []
    for sampler in ranks:
        sampler.set_epoch(EPOCH)
        heads.append(take(sampler, min(batches * per_batch(sampler), len(sampler))))
    states = [sampler.state_dict() for sampler in ranks]
    assert all(state == states[0] for state in states), "ranks in lockstep save the same state"
    return heads, states[0]


def resumed(make: Callable[[int, int], Any], world: int, state: dict) -> list[list[Any]]:
    """The rest of the epoch on each of `world` ranks, every one loading `state`."""
    tails = []
    for rank in range(world):
        sampler = make(world, rank)
        sampler.load_state_dict(state)
        sampler.set_epoch(EPOCH)  # the usual call at the top of a resumed loop
        tails.append(list(sampler))
    assert len({len(tail) for tail in tails}) == 1, "the new ranks run the same number of steps"
    return tails


def batch_points(make: Callable[[int, int], Any], world: int) -> list[int]:
    """k for a save after k batches: 0, 1, two in the middle, the one before the last, the last."""
    sampler = make(world, 0)
    last = -(-len(sampler) // per_batch(sampler))
    return sorted({0, 1, last // 3, last // 2, max(last - 1, 0), last})


def epoch_units(make: Callable[[int, int], Any]) -> list[Any]:
    whole = make(1, 0)
    whole.set_epoch(EPOCH)
    return units(list(whole))


# -- nothing lost, nothing twice -----------------------------------------------------


@pytest.mark.parametrize("kind", SAMPLERS)
@pytest.mark.parametrize("old_world", WORLDS)
def test_every_item_once_across_old_and_new_ranks(roots, kind, old_world) -> None:
    make = SAMPLERS[kind](roots)
    everything = epoch_units(make)
    assert len(set(everything)) == len(everything)
    for batches in batch_points(make, old_world):
        heads, state = interrupted(make, old_world, batches)
        assert state["consumed"] == old_world * len(heads[0]) and state["num_replicas"] == old_world
        taken = [unit for head in heads for unit in units(head)]
        finished = len(heads[0]) == len(make(old_world, 0))
        for new_world in WORLDS:
            case = f"{kind}: {old_world} ranks, {batches} batches, then {new_world} ranks"
            rest = [unit for tail in resumed(make, new_world, state) for unit in units(tail)]
            counts = Counter(taken + rest)
            assert set(counts) == set(everything), case
            repeats = sum(counts.values()) - len(everything)
            if finished:  # the old ranks padded the epoch; the new ones have nothing left
                assert rest == [] and repeats <= old_world - 1, case
            else:
                assert len(set(taken)) == len(taken), case  # no padding before the last step
                assert repeats <= new_world - 1, case
                assert len(rest) == new_world * -(-(len(everything) - len(taken)) // new_world), case


@pytest.mark.parametrize("kind", SAMPLERS)
@pytest.mark.parametrize("world", WORLDS)
def test_the_same_world_resumes_exactly(roots, kind, world) -> None:
    make = SAMPLERS[kind](roots)
    whole = []
    for rank in range(world):
        sampler = make(world, rank)
        sampler.set_epoch(EPOCH)
        whole.append(list(sampler))
    for batches in batch_points(make, world):
        heads, state = interrupted(make, world, batches)
        tails = resumed(make, world, state)
        assert [h + t for h, t in zip(heads, tails, strict=True)] == whole, (kind, world, batches)


@pytest.mark.parametrize("kind", SAMPLERS)
def test_a_chain_of_resumes_on_other_worlds(roots, kind) -> None:
    """8 ranks, then 3, then 2, then 4 to the end of the epoch: still every item once."""
    make = SAMPLERS[kind](roots)
    everything = epoch_units(make)
    heads, state = interrupted(make, 8, 1)
    delivered = [unit for head in heads for unit in units(head)]
    for world, batches in ((3, 2), (2, 1)):
        ranks = [make(world, rank) for rank in range(world)]
        for sampler in ranks:
            sampler.load_state_dict(state)
            delivered += units(take(sampler, batches * per_batch(sampler)))
        state = ranks[-1].state_dict()
        assert state["num_replicas"] == world and state["consumed"] == world * batches * per_batch(ranks[0])
    delivered += [unit for tail in resumed(make, 4, state) for unit in units(tail)]
    counts = Counter(delivered)
    assert set(counts) == set(everything)
    assert sum(counts.values()) - len(everything) <= 3


def test_drop_last_delivers_nothing_twice(roots) -> None:
    make = shard_aware(roots, drop_last=True)
    for old_world in (2, 3, 8):
        for batches in batch_points(make, old_world):
            heads, state = interrupted(make, old_world, batches)
            taken = [unit for head in heads for unit in head]
            for new_world in (1, 3, 4):
                rest = [unit for tail in resumed(make, new_world, state) for unit in tail]
                delivered = taken + rest
                assert len(set(delivered)) == len(delivered), (old_world, batches, new_world)
                left = RECORDS - len(taken)
                assert RECORDS - len(delivered) == left % new_world, (old_world, batches, new_world)


# -- one global sequence -------------------------------------------------------------


@pytest.mark.parametrize("world", WORLDS)
def test_whole_rounds_take_a_prefix_of_the_one_sequence(roots, world) -> None:
    """After whole rounds of stretches the world has taken the epoch's first records, on any world size,
    and each rank's stretch is one of the single rank's, whole: its runs stay together."""
    make = shard_aware(roots)
    one_rank = epoch_units(make)
    stretch = 6  # run_length 2 * runs_mixed 3
    orders = [make(world, rank) for rank in range(world)]
    for sampler in orders:
        sampler.set_epoch(EPOCH)
    shares = [sampler.rank_items() for sampler in orders]
    rounds = (len(shares[0]) - 1) // stretch  # before the last step, which deals one record each
    assert rounds >= 1
    for done in range(rounds + 1):
        taken = [i for share in shares for i in share[: done * stretch]]
        assert sorted(taken) == sorted(one_rank[: done * stretch * world]), done
    for rank, share in enumerate(shares):
        for number in range(rounds):
            first = (number * world + rank) * stretch
            assert share[number * stretch : (number + 1) * stretch] == one_rank[first : first + stretch]


def test_a_save_partway_through_stretches_keeps_the_rest_of_them_whole(roots) -> None:
    make = shard_aware(roots)
    one_rank = epoch_units(make)
    stretch = 6
    _, state = interrupted(make, 2, 1)  # 4 records of each rank's first stretch of 6
    # One rank walks the rest of the epoch from its third stretch, and takes
    # the two stretches' last two records each at the end.
    assert resumed(make, 1, state) == [one_rank[12:] + one_rank[4:6] + one_rank[10:12]]
    for world in (3, 4):
        for rank, share in enumerate(resumed(make, world, state)):
            first = (2 + rank) * stretch
            assert share[:stretch] == one_rank[first : first + stretch]


def test_batch_samplers_keep_their_batches(roots) -> None:
    """A resumed rank hands out the epoch's own batches: bucketed by length, mixed by weight."""
    for kind in ("length-bucket", "mixture"):
        make = SAMPLERS[kind](roots)
        whole = set(epoch_units(make))
        _, state = interrupted(make, 3, 2)
        for world in (2, 4):
            assert {unit for tail in resumed(make, world, state) for unit in units(tail)} <= whole, kind
    make = mixture_sampler(roots)
    _, state = interrupted(make, 8, 1)
    quotas = {tuple(row) for row in make(1, 0).quotas.tolist()}
    for tail in resumed(make, 3, state):
        for batch in tail:
            # Member 0 holds mixture indices below RECORDS, member 1 the rest.
            assert (sum(i < RECORDS for i in batch), sum(i >= RECORDS for i in batch)) in quotas


# -- the state and its refusals --------------------------------------------------------


def test_a_loaded_state_goes_to_the_first_iterator_that_yields(roots) -> None:
    """torch's multi-worker DataLoader calls iter() twice and drops the first iterator."""
    make = shard_aware(roots)
    heads, state = interrupted(make, 2, 3)
    expected = resumed(make, 3, state)[1]
    sampler = make(3, 1)
    sampler.load_state_dict(state)
    assert sampler.state_dict()["spans"] != [[0, RECORDS]]  # what was left, waiting
    discarded, used = iter(sampler), iter(sampler)
    assert list(used) == expected
    sampler.set_epoch(EPOCH)
    assert list(discarded) == sampler.rank_items()  # after the resumed pass: the epoch afresh


def test_states_that_do_not_fit_are_refused(roots) -> None:
    make = shard_aware(roots)
    _, state = interrupted(make, 2, 1)
    with pytest.raises(ValueError, match="run_length: saved 2, now 16"):
        ShardAwareSampler(roots["records"], num_replicas=3, rank=0).load_state_dict(state)
    with pytest.raises(ValueError, match="drop_last: saved False, now True"):
        shard_aware(roots, drop_last=True)(3, 0).load_state_dict(state)
    with pytest.raises(ValueError, match="whole number of steps of the 2 ranks"):
        make(3, 0).load_state_dict({**state, "consumed": 7})
    with pytest.raises(ValueError, match="at most 150 for its spans"):
        make(3, 0).load_state_dict({**state, "consumed": 160})
    with pytest.raises(ValueError, match="spans must be disjoint"):
        make(3, 0).load_state_dict({**state, "spans": [[0, 100], [90, 150]]})
    with pytest.raises(ValueError, match="saved by an sds-loader before 0.3"):
        make(3, 0).load_state_dict({"epoch": 1, "seed": 3, "yielded": 4, "layout": state["layout"]})
    buckets = length_bucket(roots)
    _, saved = interrupted(buckets, 2, 1)
    with pytest.raises(ValueError, match="batch_size: saved 4, now 8"):
        LengthBucketSampler(roots["lengths"], 8, axis="a1", seed=3, pool_batches=4).load_state_dict(saved)


# -- another number of DataLoader workers ------------------------------------------------


def loader_rows(loader: Any, count: int | None = None) -> list[list[int]]:
    rows = []
    for batch in loader:
        rows.append(batch["index"].tolist())
        if count is not None and len(rows) == count:
            break
    return rows


@pytest.mark.parametrize("kind", ["shard-aware", "length-bucket"])
@pytest.mark.parametrize(("workers", "new_workers", "new_world"), [(2, 3, 1), (0, 2, 2), (2, 1, 3)])
def test_another_number_of_workers_resumes_from_the_samplers_state(
    roots, kind, workers, new_workers, new_world
) -> None:
    """A StatefulDataLoader state saved with W workers, resumed with W' (and on another world)."""
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    if kind == "shard-aware":
        dataset = SDSTorchDataset(roots["records"], targets={"index": "index"})
        make = shard_aware(roots)
        count = RECORDS
    else:
        dataset = SDSTorchDataset(roots["lengths"], targets={"index": "index"})
        make = length_bucket(roots)
        count = 90

    def loader(sampler: Any, num_workers: int) -> Any:
        sampler.set_epoch(EPOCH)
        batching = (
            {"batch_size": BATCH, "sampler": sampler} if kind == "shard-aware" else {"batch_sampler": sampler}
        )
        context = {"multiprocessing_context": "fork"} if num_workers else {}
        return stateful.StatefulDataLoader(
            dataset, collate_fn=collate, num_workers=num_workers, **batching, **context
        )

    whole = loader_rows(loader(make(1, 0), workers))
    running = loader(make(1, 0), workers)
    head = loader_rows(running, 5)  # the workers have read ahead of this by now
    checkpoint = running.state_dict()
    del running
    rests = []
    for rank in range(new_world):
        sampler = make(new_world, rank)
        fresh = loader(sampler, new_workers)
        sampler.load_state_dict(sampler_state(checkpoint))
        rests.append(loader_rows(fresh))
    if new_world == 1:
        assert head + rests[0] == whole  # the same world: exactly the batches left
    counts = Counter(i for rows in [head, *rests] for row in rows for i in row)
    assert set(counts) == set(range(count))
    assert sum(counts.values()) - count <= new_world - 1


def test_sampler_state_refuses_what_it_cannot_read() -> None:
    with pytest.raises(ValueError, match="holds no sds-loader sampler's state"):
        sampler_state({"_index_sampler_state": None, "_sampler_iter_state": {"samples_yielded": 3}})
    with pytest.raises(ValueError, match="snapshot_every_n_steps=1"):
        sampler_state({"_snapshot": {"_main_snapshot": {}}, "_steps_since_snapshot": 2})
    with pytest.raises(TypeError, match="takes a StatefulDataLoader.state_dict"):
        sampler_state([1, 2])  # type: ignore[arg-type]


def test_padding_never_comes_before_the_last_step(roots) -> None:
    """The only repeated records of an epoch are in each rank's last step."""
    make = shard_aware(roots)
    for world in WORLDS:
        orders = [make(world, rank).rank_items() for rank in range(world)]
        before_last = [i for order in orders for i in order[:-1]]
        assert len(set(before_last)) == len(before_last)
        assert sorted(set(i for order in orders for i in order)) == list(range(RECORDS))
        assert np.sum([len(order) for order in orders]) - RECORDS <= world - 1
