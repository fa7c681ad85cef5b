"""A record's augmentation is a function of (seed, epoch, ordinal) alone: the same bytes whatever
its batch, the thread count, DataLoader workers (forked or spawned), the rank reading it, or a
resume mid-epoch; another epoch or seed draws another."""

from __future__ import annotations

from torch_required import torch  # noqa: F401 - skips without torch

import multiprocessing
import pickle
from typing import Any

import numpy as np
import pytest
from augment_ranks import rank_rows
from native_required import _native  # noqa: F401
from torch.utils.data import DataLoader
from torchdata.stateful_dataloader import StatefulDataLoader

from sds_loader import BatchReader, Window
from sds_loader.augment import Chain, FrequencyShift, Noise, Phase, Resample, TimeShift
from sds_loader.torch import SDSTorchDataset, ShardAwareSampler, collate

CHAIN = Chain(
    [
        Phase(),
        FrequencyShift(hz=(-1e5, 1e5)),
        TimeShift(samples=(-64, 64), probability=0.7),
        Noise(snr_db=(0, 20)),
        Resample(factor=(0.8, 1.25), probability=0.5),
    ]
)
WINDOW = Window("time", 256, crop="random", pad=True)
CONTEXTS = [c for c in ("fork", "spawn") if c in multiprocessing.get_all_start_methods()]
SEED = 7
COUNT = 24


def by_ordinal(batch: dict[str, Any], ordinals: list[int]) -> dict[int, dict[str, bytes]]:
    rows: dict[int, dict[str, bytes]] = {}
    for k, ordinal in enumerate(ordinals):
        rows[ordinal] = {key: np.asarray(value[k]).tobytes() for key, value in batch.items()}
    return rows


def test_threads_and_batches_do_not_change_a_row(captures: str) -> None:
    chain = Chain(CHAIN.transforms, seed=SEED)
    ordinals = list(range(COUNT))
    one = BatchReader(captures, fields=("samples",), augment=chain, threads=1)
    two = BatchReader(captures, fields=("samples",), augment=chain, threads=2)
    whole = by_ordinal(one.read(ordinals, epoch=5), ordinals)
    assert by_ordinal(two.read(ordinals, epoch=5), ordinals) == whole
    rng = np.random.default_rng(0)
    shuffled = rng.permutation(COUNT).tolist()
    for begin in range(0, COUNT, 5):
        part = shuffled[begin : begin + 5]
        rows = by_ordinal(two.read(part, epoch=5), part)
        assert all(rows[o] == whole[o] for o in part)


def test_epochs_and_seeds_draw_anew(captures: str) -> None:
    ordinals = list(range(COUNT))
    reader = BatchReader(captures, fields=("samples",), augment=Chain(CHAIN.transforms, seed=SEED))
    first, again = reader.read(ordinals, epoch=1), reader.read(ordinals, epoch=1)
    other = reader.read(ordinals, epoch=2)
    reseeded = BatchReader(captures, fields=("samples",), augment=Chain(CHAIN.transforms, seed=SEED + 1))
    for key in first:
        np.testing.assert_array_equal(first[key], again[key])
    for changed in (other, reseeded.read(ordinals, epoch=1)):
        assert not np.array_equal(first["augment.0.phase.radians"], changed["augment.0.phase.radians"])
        assert not np.array_equal(first["samples"], changed["samples"])


def test_a_pickled_reader_draws_the_same(captures: str) -> None:
    reader = BatchReader(
        captures, fields=("samples",), augment=Chain(CHAIN.transforms, seed=SEED), window=WINDOW
    )
    ordinals = [4, 9, 1]
    before = reader.read(ordinals, epoch=3)
    copy = pickle.loads(pickle.dumps(reader))
    after = copy.read(ordinals, epoch=3)
    assert sorted(before) == sorted(after)
    for key in before:
        np.testing.assert_array_equal(before[key], after[key])
    assert pickle.loads(pickle.dumps(CHAIN)) == CHAIN


def dataset(root: str) -> SDSTorchDataset:
    return SDSTorchDataset(root, target="label", window=WINDOW, seed=SEED, extras=("ordinal",), augment=CHAIN)


def loader_rows(loader: Any) -> dict[int, dict[str, bytes]]:
    rows: dict[int, dict[str, bytes]] = {}
    for batch in loader:
        ordinals = batch["ordinal"].tolist()
        rows.update(by_ordinal({k: v.numpy() for k, v in batch.items()}, ordinals))
    return rows


def expected(root: str, epoch: int) -> dict[int, dict[str, bytes]]:
    """What a BatchReader with the dataset's seed reads in `epoch`, starts from the dataset's crop."""
    reader = BatchReader(
        root,
        fields=("samples",),
        targets=("label",),
        window=WINDOW,
        extras=("ordinal",),
        augment=Chain(CHAIN.transforms, seed=SEED),
    )
    ordinals = list(range(COUNT))
    batch = reader.read(ordinals, starts=reader.window_starts(ordinals, seed=SEED, epoch=epoch), epoch=epoch)
    renamed = {
        (
            "inputs"
            if k == "samples"
            else "target"
            if k == "label"
            else "inputs_length"
            if k == "samples_length"
            else k
        ): v
        for k, v in batch.items()
    }
    return by_ordinal(renamed, ordinals)


@pytest.mark.parametrize("context", CONTEXTS)
def test_workers_deliver_what_one_process_reads(captures: str, context: str) -> None:
    made = dataset(captures)
    made.set_epoch(2)
    serial = loader_rows(DataLoader(made, batch_size=5, shuffle=True, collate_fn=collate))
    workers = loader_rows(
        DataLoader(
            made,
            batch_size=5,
            shuffle=True,
            collate_fn=collate,
            num_workers=2,
            multiprocessing_context=context,
        )
    )
    want = expected(captures, 2)
    assert sorted(serial) == sorted(workers) == list(range(COUNT))
    assert serial == workers == want
    assert any(key.startswith("augment.") for key in want[0])


def test_two_ranks_read_what_one_process_reads(captures: str) -> None:
    chain = Chain(CHAIN.transforms[:4])
    context = multiprocessing.get_context("spawn")
    with context.Pool(2) as pool:
        ranks = pool.starmap(rank_rows, [(captures, chain, rank, 3) for rank in (0, 1)])
    assert not set(ranks[0]) & set(ranks[1])
    assert sorted({**ranks[0], **ranks[1]}) == list(range(COUNT))
    reader = BatchReader(
        captures,
        fields=("samples",),
        targets=("label",),
        extras=("ordinal",),
        augment=Chain(chain.transforms, seed=SEED),
    )
    ordinals = list(range(COUNT))
    batch = reader.read(ordinals, epoch=3)
    for rows in ranks:
        for ordinal, row in rows.items():
            assert row["inputs"] == batch["samples"][ordinal].tobytes()
            assert row["augment.3.noise.sigma2"] == batch["augment.3.noise.sigma2"][ordinal].tobytes()


def test_a_stateful_loader_resumed_mid_epoch_sees_the_same_augmentation(captures: str) -> None:
    def make_loader() -> StatefulDataLoader:
        made = dataset(captures)
        made.set_epoch(1)
        sampler = ShardAwareSampler(made, seed=11, run_length=4, runs_mixed=2)
        sampler.set_epoch(1)
        return StatefulDataLoader(made, batch_size=3, sampler=sampler, num_workers=2, collate_fn=collate)

    def batches(loader: Any, count: int | None = None) -> list[dict[int, dict[str, bytes]]]:
        out = []
        for batch in loader:
            out.append(by_ordinal({k: v.numpy() for k, v in batch.items()}, batch["ordinal"].tolist()))
            if count is not None and len(out) == count:
                break
        return out

    whole = batches(make_loader())
    interrupted = make_loader()
    head = batches(interrupted, 3)
    state = interrupted.state_dict()
    del interrupted
    resumed = make_loader()
    resumed.load_state_dict(state)
    assert head + batches(resumed) == whole
