"""Batches of a bounded set of shapes: boundaries on the window and the sampler, batches filled to
full size, read through a real DataLoader and checked against signal_dataset's own reader."""

from __future__ import annotations

import torch_required  # noqa: F401 - skips this module without torch

import re
from collections import Counter

import numpy as np
import pytest
import signal_dataset as sds
from spread_records import BOUNDARIES, COUNT, spread_length, write_spread
from torch.utils.data import DataLoader, Subset
from torchdata.stateful_dataloader import StatefulDataLoader

from sds_loader import Boundaries, Window
from sds_loader.samplers.filled_batches import VALID_KEY, FilledBatch
from sds_loader.samplers.length_bucket import padding_waste
from sds_loader.torch import LengthBucketSampler, SDSTorchDataset, collate

BATCH = 16
LENGTHS = np.asarray([spread_length(o) for o in range(COUNT)])
BOUNDED = Boundaries(BOUNDARIES)


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> str:
    return write_spread(tmp_path_factory.mktemp("bounded-shapes"))


def dataset(root: str, boundaries: Boundaries | None = BOUNDED) -> SDSTorchDataset:
    return SDSTorchDataset(root, window=Window("time", None, pad=True, boundaries=boundaries))


def epoch(root: str, sampler: LengthBucketSampler, boundaries: Boundaries | None = BOUNDED, workers: int = 0):
    data = dataset(root, boundaries)
    return list(DataLoader(data, batch_sampler=sampler, collate_fn=collate, num_workers=workers))


def shapes(batches) -> Counter:
    return Counter(tuple(batch["inputs"].shape) for batch in batches)


def measured_waste(batches) -> float:
    """Padding's share of the positions the batches hold, from what the loader delivered."""
    valid = sum(
        int(b["inputs_length"][b[VALID_KEY]].sum()) if VALID_KEY in b else int(b["inputs_length"].sum())
        for b in batches
    )
    total = sum(b["inputs"].shape[0] * b["inputs"].shape[-1] for b in batches)
    return 1.0 - valid / total


def check_rows(root: str, batch) -> list[int]:
    """Each valid row is its record's samples as signal_dataset reads them, zero past them; the
    padding rows are zero with length 0. Returns the valid rows' ordinals."""
    reference = sds.open(root)
    mask = batch[VALID_KEY].tolist() if VALID_KEY in batch else [True] * len(batch["target"])
    seen = []
    for row, ordinal in enumerate(batch["target"].tolist()):
        inputs, length = batch["inputs"][row].numpy(), int(batch["inputs_length"][row])
        if not mask[row]:
            assert length == 0 and not inputs.any() and ordinal == 0
            continue
        data = reference[ordinal]["samples"].data
        assert length == min(data.shape[1], inputs.shape[1])
        np.testing.assert_array_equal(inputs[:, :length], data[:, :length])
        assert not inputs[:, length:].any()
        seen.append(ordinal)
    return seen


def test_boundaries_bound_an_epochs_shapes_and_without_them_each_batch_has_its_own(root):
    unbounded = epoch(root, LengthBucketSampler(root, BATCH, seed=1), boundaries=None)
    # Today's padded path: a new length almost every batch.
    assert len(shapes(unbounded)) >= 0.8 * len(unbounded), shapes(unbounded)

    bounded = epoch(root, LengthBucketSampler(root, BATCH, seed=1, boundaries=BOUNDED))
    lengths = {shape[-1] for shape in shapes(bounded)}
    assert lengths <= set(BOUNDARIES) and len(lengths) == 4
    # A full shape per boundary, and each bucket's short last batch.
    assert len(shapes(bounded)) <= 2 * len(BOUNDARIES)
    assert sorted(o for batch in bounded for o in check_rows(root, batch)) == list(range(COUNT))
    for batch in bounded:
        rows = LENGTHS[batch["target"].numpy()]
        boundary = batch["inputs"].shape[-1]
        # Every record of the batch belongs to the batch's boundary: the smallest that holds it.
        smaller = BOUNDARIES[BOUNDARIES.index(boundary) - 1] if boundary != BOUNDARIES[0] else 0
        assert ((rows > smaller) & (rows <= boundary)).all(), (rows, boundary)

    filled = epoch(root, LengthBucketSampler(root, BATCH, seed=1, boundaries=BOUNDED, fill="mask"))
    assert set(shapes(filled)) <= {(BATCH, 2, b) for b in BOUNDARIES}
    assert len(shapes(filled)) == 4


def test_padding_waste_is_what_the_boundaries_imply(root):
    sampler = LengthBucketSampler(root, BATCH, seed=2, boundaries=BOUNDED)
    batches = epoch(root, sampler)
    implied = BOUNDED.implied_waste(LENGTHS)
    # Each batch holds one boundary's records and is padded to it: exactly the implied share.
    assert measured_waste(batches) == pytest.approx(implied)
    assert padding_waste(list(sampler), LENGTHS, BOUNDED) == pytest.approx(implied)
    # Powers of two: no row is padded to twice its length or more.
    assert implied < 0.5
    unbounded_max = 1.0 - LENGTHS.sum() / (COUNT * LENGTHS.max())
    assert implied < unbounded_max

    filled = LengthBucketSampler(root, BATCH, seed=2, boundaries=BOUNDED, fill="mask")
    filled_batches = epoch(root, filled)
    waste = measured_waste(filled_batches)
    assert waste == pytest.approx(padding_waste(list(filled), LENGTHS, BOUNDED))
    # The padding rows come on top, each as long as its batch's boundary: waste rises by exactly that.
    positions = sum(BOUNDARIES[int(b)] for b in BOUNDED.buckets(LENGTHS))
    filler = sum((BATCH - len(b)) * BOUNDARIES[int(BOUNDED.buckets(LENGTHS[b]).max())] for b in list(sampler))
    assert filler > 0
    assert waste == pytest.approx(1.0 - positions * (1.0 - implied) / (positions + filler))
    assert implied < waste < 0.5


def test_fill_mask_gives_every_record_once_in_one_batch_size(root):
    sampler = LengthBucketSampler(root, BATCH, seed=3, boundaries=BOUNDED, fill="mask")
    planned = list(sampler)
    assert all(isinstance(b, FilledBatch) and len(b) == BATCH for b in planned)
    assert sorted(o for b in planned for o in b[: b.valid]) == list(range(COUNT))
    assert sum(b.valid < BATCH for b in planned) <= len(BOUNDARIES)
    batches = epoch(root, sampler, workers=2)
    assert {batch["inputs"].shape[0] for batch in batches} == {BATCH}
    assert all(batch[VALID_KEY].dtype == torch_required.torch.bool for batch in batches)
    delivered = [o for batch in batches for o in check_rows(root, batch)]
    assert sorted(delivered) == list(range(COUNT))
    assert sum(int((~batch[VALID_KEY]).sum()) for batch in batches) == len(planned) * BATCH - COUNT


def test_fill_mask_on_unbounded_batches_fills_the_one_short_batch(root):
    sampler = LengthBucketSampler(root, BATCH, seed=3, fill="mask")
    batches = epoch(root, sampler, boundaries=None)
    assert len(batches) == -(-COUNT // BATCH)
    assert {batch["inputs"].shape[0] for batch in batches} == {BATCH}
    assert sorted(o for batch in batches for o in check_rows(root, batch)) == list(range(COUNT))


def test_fill_mask_under_a_fixed_window_gives_one_shape(root):
    fixed = SDSTorchDataset(root, window=Window("time", 512, pad=True))
    sampler = LengthBucketSampler(fixed, BATCH, seed=8, fill="mask")
    batches = list(DataLoader(fixed, batch_sampler=sampler, collate_fn=collate))
    assert shapes(batches) == Counter({(BATCH, 2, 512): -(-COUNT // BATCH)})
    assert sorted(o for batch in batches for o in check_rows(root, batch)) == list(range(COUNT))


def test_fill_repeat_repeats_neighbours_of_the_same_boundary(root):
    sampler = LengthBucketSampler(root, BATCH, seed=4, boundaries=BOUNDED, fill="repeat")
    planned = list(sampler)
    assert all(type(b) is list and len(b) == BATCH for b in planned)
    counts = Counter(o for b in planned for o in b)
    assert set(counts) == set(range(COUNT))
    assert sum(counts.values()) - COUNT == len(planned) * BATCH - COUNT > 0
    for b in planned:
        assert len(set(BOUNDED.buckets(LENGTHS[b]).tolist())) == 1, b
    # A short batch takes its neighbours in length: one pool holds each bucket here, sorted by
    # length, so the filled batch is its bucket's longest records.
    plain = list(LengthBucketSampler(root, BATCH, seed=4, boundaries=BOUNDED))
    buckets = BOUNDED.buckets(LENGTHS)
    short = 0
    for filled, batch in zip(planned, plain, strict=True):
        assert filled[BATCH - len(batch) :] == batch
        bucket = LENGTHS[buckets == buckets[batch[0]]]
        if len(batch) < BATCH and bucket.size >= BATCH:
            assert sorted(LENGTHS[filled]) == sorted(bucket)[-BATCH:]
            short += 1
    assert short >= 2
    batches = epoch(root, sampler)
    assert VALID_KEY not in batches[0]
    assert len(shapes(batches)) <= len(BOUNDARIES)
    for batch in batches:
        check_rows(root, batch)


@pytest.mark.parametrize("fill", ["mask", "repeat"])
def test_ranks_take_full_batches_and_cover_the_epoch(root, fill):
    world = 4
    ranks = [
        LengthBucketSampler(root, BATCH, seed=5, boundaries=BOUNDED, fill=fill, num_replicas=world, rank=r)
        for r in range(world)
    ]
    per_rank = [list(sampler) for sampler in ranks]
    whole = LengthBucketSampler(root, BATCH, seed=5, boundaries=BOUNDED, fill=fill)
    items = len(whole)
    assert items % world, "the ranks must need padding for this test to mean anything"
    assert {len(b) for b in per_rank} == {-(-items // world)}
    assert all(len(batch) == BATCH for batches in per_rank for batch in batches)
    if fill == "mask":
        valid = [o for batches in per_rank for b in batches for o in b[: b.valid]]
        assert sorted(valid) == list(range(COUNT))  # the ranks' repeated batches are all padding
        padding = [b for batches in per_rank for b in batches if b.valid == 0]
        assert len(padding) == world * -(-items // world) - items
    else:
        assert {o for batches in per_rank for b in batches for o in b} == set(range(COUNT))
    # One rank through a loader: full batches of its boundaries, valid rows its records.
    batches = epoch(root, ranks[1])
    assert len(shapes(batches)) <= len(BOUNDARIES)
    if fill == "mask":
        delivered = [o for batch in batches for o in check_rows(root, batch)]
        assert sorted(delivered) == sorted(o for b in per_rank[1] for o in b[: b.valid])


def test_resume_with_boundaries_and_fill_is_exact_and_a_loader_resumes_it(root):
    def make(**kwargs) -> LengthBucketSampler:
        return LengthBucketSampler(root, BATCH, boundaries=BOUNDED, fill="mask", **kwargs)

    sampler = make(seed=6)
    sampler.set_epoch(2)
    expected = list(sampler)
    iterator = iter(sampler)
    taken = [next(iterator) for _ in range(7)]
    state = sampler.state_dict()
    restored = make()
    restored.load_state_dict(state)
    rest = list(restored)
    assert taken + rest == expected
    assert [b.valid for b in taken + rest] == [b.valid for b in expected]
    with pytest.raises(ValueError, match="boundaries: saved"):
        LengthBucketSampler(root, BATCH, fill="mask").load_state_dict(state)
    with pytest.raises(ValueError, match="fill: saved 'mask', now 'repeat'"):
        LengthBucketSampler(root, BATCH, boundaries=BOUNDED, fill="repeat").load_state_dict(state)

    # Through a StatefulDataLoader with workers: the batches after a restore are the uninterrupted ones.
    def loader(sampler: LengthBucketSampler) -> StatefulDataLoader:
        return StatefulDataLoader(dataset(root), batch_sampler=sampler, num_workers=2, collate_fn=collate)

    first = make(seed=6)
    first.set_epoch(1)
    whole = [batch["target"].tolist() for batch in loader(first)]
    interrupted = loader(make(seed=6))
    interrupted.batch_sampler.set_epoch(1)
    head = []
    for step, batch in enumerate(interrupted):
        head.append(batch["target"].tolist())
        if step == 4:
            checkpoint = interrupted.state_dict()
            break
    again = loader(make(seed=6))
    again.load_state_dict(checkpoint)
    tail = [batch["target"].tolist() for batch in again]
    assert head + tail == whole


def test_cut_and_refuse_past_the_largest_boundary(root):
    small = (256, 512, 1024)
    longer = int((LENGTHS > 1024).sum())
    assert longer > 0
    sampler = LengthBucketSampler(root, BATCH, seed=7, boundaries=small)
    batches = epoch(root, sampler, boundaries=Boundaries(small))
    assert {shape[-1] for shape in shapes(batches)} <= set(small)
    cut_rows = 0
    reference = sds.open(root)
    for batch in batches:
        for row, ordinal in enumerate(batch["target"].tolist()):
            if LENGTHS[ordinal] > 1024:  # crop="start": the first 1024 positions, and the length says so
                assert int(batch["inputs_length"][row]) == 1024
                data = reference[ordinal]["samples"].data
                np.testing.assert_array_equal(batch["inputs"][row].numpy(), data[:, :1024])
                cut_rows += 1
    assert cut_rows == longer
    refuse = Boundaries(small, overflow="refuse")
    with pytest.raises(
        ValueError, match=rf"{longer} records hold more positions along axis 'time' than the largest"
    ):
        LengthBucketSampler(root, BATCH, boundaries=refuse)
    reader = dataset(root, refuse).reader
    shortest_long = int(np.argmax(LENGTHS > 1024))
    with pytest.raises(ValueError, match=f"record {shortest_long} holds"):
        reader.read([0, shortest_long])


def test_arguments(root):
    with pytest.raises(ValueError, match="fill must be None or one of"):
        LengthBucketSampler(root, BATCH, fill="zeros")
    with pytest.raises(ValueError, match="fills the short batches that drop_last=True drops"):
        LengthBucketSampler(root, BATCH, fill="mask", drop_last=True)
    with pytest.raises(TypeError, match="boundaries must be a sds_loader.Boundaries or a sequence"):
        LengthBucketSampler(root, BATCH, boundaries=256)
    with pytest.raises(ValueError, match="must increase strictly"):
        LengthBucketSampler(root, BATCH, boundaries=(512, 256))
    subset = Subset(dataset(root), list(range(0, COUNT, 2)))
    with pytest.raises(
        ValueError, match="a torch Subset rebuilds them without the mark; over a Subset, use fill='repeat'"
    ):
        LengthBucketSampler(subset, BATCH, fill="mask")
    repeated = list(LengthBucketSampler(subset, BATCH, boundaries=BOUNDED, fill="repeat"))
    assert {p for b in repeated for p in b} == set(range(COUNT // 2)) and {len(b) for b in repeated} == {
        BATCH
    }
    # drop_last drops each boundary's short batch.
    dropped = list(LengthBucketSampler(root, BATCH, seed=1, boundaries=BOUNDED, drop_last=True))
    buckets = np.bincount(BOUNDED.buckets(LENGTHS), minlength=4)
    assert len(dropped) == int((buckets // BATCH).sum()) and {len(b) for b in dropped} == {BATCH}


def test_fill_mask_padding_rows_carry_no_records_ordinal(root):
    """A padding row's ordinal is -1, which no record has; its start is 0 and its id its copy's."""
    data = SDSTorchDataset(
        root,
        window=Window("time", None, pad=True, boundaries=BOUNDED),
        extras=("ordinal", "id", "start"),
    )
    sampler = LengthBucketSampler(data, BATCH, seed=9, boundaries=BOUNDED, fill="mask")
    batches = list(DataLoader(data, batch_sampler=sampler, collate_fn=collate, num_workers=2))
    padding = 0
    for batch, planned in zip(batches, list(sampler), strict=True):
        valid = batch[VALID_KEY]
        ordinals = batch["ordinal"]
        assert ordinals.dtype == torch_required.torch.int64
        assert ordinals[valid].tolist() == batch["target"][valid].tolist() == planned[: planned.valid]
        assert ordinals[~valid].tolist() == [-1] * (BATCH - planned.valid)
        assert not batch["start"][~valid].any()
        padding += BATCH - planned.valid
    assert padding > 0
    # Ids travel beside the tensors (a sample holds its own): a padding row's is its copy's.
    short = next(b for b in sampler if b.valid < BATCH)
    samples = data.__getitems__(short)
    assert [s["id"] for s in samples] == [f"spread-{o:05d}" for o in short]
    assert [int(s["ordinal"]) for s in samples][short.valid :] == [-1] * (BATCH - short.valid)
    # Counting ordinals without the mask counts every record once, and nothing else as a record.
    counted = Counter(o for batch in batches for o in batch["ordinal"].tolist() if o >= 0)
    assert counted == Counter(range(COUNT))


def test_a_sampler_whose_boundaries_differ_from_the_windows_is_refused_naming_both(root):
    window_boundaries = Boundaries.powers_of_two(256, 2048)
    other = Boundaries((300, 600, 3000))
    data = dataset(root, window_boundaries)
    expected = (
        r"LengthBucketSampler boundaries=Boundaries\(\(300, 600, 3000\), overflow='cut'\) differ from "
        r"the window's, Boundaries\(\(256, 512, 1024, 2048\), overflow='cut'\)"
    )
    for given in (data, data.reader, Subset(data, list(range(0, COUNT, 3)))):
        with pytest.raises(ValueError, match=expected):
            LengthBucketSampler(given, BATCH, boundaries=other, fill="repeat")
    with pytest.raises(
        ValueError, match=r"Boundaries\(\(256, 512\), overflow='cut'\) differ from the window's"
    ):
        LengthBucketSampler(data, BATCH, boundaries=(256, 512))
    # The same lengths, given as a sequence or under another overflow policy, are the window's.
    assert LengthBucketSampler(data, BATCH, boundaries=(256, 512, 1024, 2048)).boundaries == window_boundaries
    LengthBucketSampler(data, BATCH, boundaries=Boundaries(BOUNDARIES, overflow="refuse"))
    # Without boundaries of its own, or over a window without them, the sampler is not compared.
    LengthBucketSampler(data, BATCH)
    LengthBucketSampler(dataset(root, None), BATCH, boundaries=other)


def test_refusing_overlong_records_says_how_many_and_names_the_first(root):
    refuse = Boundaries((256, 512, 1024), overflow="refuse")
    over = np.flatnonzero(LENGTHS > 1024)
    assert over.size > 5
    first = ", ".join(f"record {o} holds {LENGTHS[o]}" for o in over[:5])
    whole = (
        f"{over.size} records hold more positions along axis 'time' than the largest boundary, 1024, "
        f"and {refuse!r} refuses to cut them: {first} and {over.size - 5} more; add a larger boundary "
        f"(the longest holds {LENGTHS.max()}), or pass overflow='cut'"
    )
    with pytest.raises(ValueError, match=re.escape(whole)):
        LengthBucketSampler(root, BATCH, boundaries=refuse)
    # A batch's read counts the batch's own, in the batch's order.
    batch = [int(over[3]), 0, int(over[1])]
    message = (
        f"2 records hold more positions along axis 'time' than the largest boundary, 1024, and "
        f"{refuse!r} refuses to cut them: record {batch[0]} holds {LENGTHS[batch[0]]}, "
        f"record {batch[2]} holds {LENGTHS[batch[2]]}; add a larger boundary"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        dataset(root, refuse).reader.read(batch)
