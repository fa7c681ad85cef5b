"""Mixture and MixtureSampler: byte-exact mixed batches, counts by weight, workers, resume.

Two datasets written with signal_dataset's writer (zstd and uncompressed
shards, different sizes) are mixed; every row of every batch checked here is
compared, byte for byte, with ``signal_dataset.open(uri)[j]`` of the member
that holds it. Records carry an "index" in their metadata (member 1's start
at 1000), so a row names its record wherever it was read.
"""

from __future__ import annotations

from torch_required import torch

import functools
import os
import pickle
from collections.abc import Sequence

import numpy as np
import pytest
import signal_dataset as sds
from s3_fixtures import upload_dataset
from sds_factory import capture, write_dataset
from torch.utils.data import DataLoader, get_worker_info

from sds_loader import MixedShapesError, Window
from sds_loader.samplers import MixtureSampler, ShardAwareSampler
from sds_loader.samplers.mixture_sampler import batch_quotas
from sds_loader.torch import Batch, Mixture, SDSTorchDataset, collate

SIZES = (120, 50)
#: Member 1's "index" metadata starts here, so an index names its member.
SECOND = 1000


def make(ordinal: int, *, base: int, samples: int) -> sds.Record:
    record = capture(base + ordinal, channels=2, samples=samples)
    return sds.Record(
        id=record.id, fields=record.fields, metadata={**record.metadata, "index": base + ordinal}
    )


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    base = tmp_path_factory.mktemp("mixture")
    first, second = base / "first", base / "second"
    write_dataset(first, SIZES[0], functools.partial(make, base=0, samples=32), records_per_shard=40)
    write_dataset(
        second,
        SIZES[1],
        functools.partial(make, base=SECOND, samples=32),
        records_per_shard=16,
        writer_options="group_size:1,uncompressed",
    )
    return str(first), str(second)


@pytest.fixture(scope="module")
def longer(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Captures of another length (48 samples), to mix only under a window."""
    root = tmp_path_factory.mktemp("mixture") / "longer"
    write_dataset(root, 30, functools.partial(make, base=2000, samples=48), records_per_shard=30)
    return str(root)


def mixture(roots: Sequence[str], weights: Sequence[float] = (0.7, 0.3), **kwargs: object) -> Mixture:
    members = [SDSTorchDataset(root, targets={"index": "index"}) for root in roots]
    return Mixture(members, weights, **kwargs)  # type: ignore[arg-type]


class Reference:
    """signal_dataset's own reader of every member, by mixture index."""

    def __init__(self, roots: Sequence[str]) -> None:
        self.members = [sds.open(root) for root in roots]
        self.offsets = np.cumsum([0, *(len(member) for member in self.members)])

    def record(self, index: int) -> sds.Record:
        member = int(np.searchsorted(self.offsets, index, side="right") - 1)
        return self.members[member][index - int(self.offsets[member])]

    def check(
        self, batch: dict[str, torch.Tensor], indices: Sequence[int], window: int | None = None
    ) -> None:
        assert batch["inputs"].shape[0] == len(indices)
        for row, index in enumerate(indices):
            record = self.record(index)
            expected = record["samples"].data
            if window is not None:
                expected = np.ascontiguousarray(expected[:, :window])
            got = batch["inputs"][row].numpy()
            assert got.dtype == expected.dtype and got.shape == expected.shape, (index, got.shape)
            assert got.tobytes() == expected.tobytes(), index
            assert batch["target"][row].item() == record.metadata["label"], index
            assert batch["index"][row].item() == record.metadata["index"], index


# -- the dataset --------------------------------------------------------------


def test_index_space_is_the_concatenation(roots: tuple[str, str]) -> None:
    mixed = mixture(roots)
    assert len(mixed) == sum(SIZES)
    assert mixed.offsets.tolist() == [0, SIZES[0], sum(SIZES)]
    assert mixed.weights == pytest.approx((0.7, 0.3))
    assert mixed.epoch_size == sum(SIZES) and mixed.keys == ("inputs", "target", "index")
    members, records = mixed.locate([0, 119, 120, 169, -1])
    assert members.tolist() == [0, 0, 1, 1, 1] and records.tolist() == [0, 119, 0, 49, 49]
    reference = Reference(roots)
    for index in (0, 119, 120, 169):
        reference.check(collate(mixed.__getitems__([index])), [index])
        item = mixed[index]
        assert item["index"].item() == reference.record(index).metadata["index"]
    with pytest.raises(IndexError, match="out of range for a dataset of 170 records"):
        mixed[170]


def test_batches_in_any_order_match_signal_dataset(roots: tuple[str, str]) -> None:
    mixed = mixture(roots)
    reference = Reference(roots)
    readers = [dataset.reader for dataset in mixed.datasets]
    rng = np.random.default_rng(5)
    grouped = [3, 17, 0, 119, 120 + 49, 120, 130]  # each member's rows in one stretch
    scattered = rng.integers(0, len(mixed), 40).tolist()  # members interleaved, repeats
    one_member = [150, 121, 150]
    for indices in (grouped, scattered, one_member, list(reversed(scattered))):
        before = [reader.stats.batches for reader in readers]
        batch = mixed.__getitems__(indices)
        assert isinstance(batch, Batch) and len(batch) == len(indices)
        reference.check(collate(batch), indices)
        # One native read per member present in the batch, whatever the order.
        present = {int(i >= SIZES[0]) for i in indices}
        assert [reader.stats.batches - b for reader, b in zip(readers, before, strict=True)] == [
            int(k in present) for k in range(2)
        ]
    empty = collate(mixed.__getitems__([]))
    assert empty["inputs"].shape == (0, 2, 32) and empty["target"].dtype == torch.int64


def test_grain_protocol_and_pickling(roots: tuple[str, str]) -> None:
    mixed = mixture(roots)
    # Grain's random-access source: __len__, __getitem__, and _getitems for batches.
    assert Mixture._getitems is Mixture.__getitems__
    reference = Reference(roots)
    reference.check(collate(mixed._getitems([160, 4])), [160, 4])
    copy = pickle.loads(pickle.dumps(mixed))
    assert copy._local is None and len(copy) == len(mixed)
    reference.check(collate(copy.__getitems__(np.array([5, 125]))), [5, 125])
    reference.check(collate(copy.__getitems__(torch.tensor([125, 5]))), [125, 5])
    assert repr(copy) == repr(mixed) and "0.7" in repr(mixed)


def test_windows_make_different_lengths_agree(roots: tuple[str, str], longer: str) -> None:
    plain = [
        SDSTorchDataset(roots[0], targets={"index": "index"}),
        SDSTorchDataset(longer, targets={"index": "index"}),
    ]
    with pytest.raises(
        ValueError,
        match=(
            r"member 1 \(.*longer\) delivers 'inputs' as complex64 \(2, 48\), "
            r"member 0 .* complex64 \(2, 32\).*Window of one length"
        ),
    ):
        Mixture(plain, [1, 1])
    window = Window("a1", 16)
    cut = [SDSTorchDataset(root, targets={"index": "index"}, window=window) for root in (roots[0], longer)]
    mixed = Mixture(cut, [1, 1])
    indices = [0, 5, 120, 149, 7]
    batch = collate(mixed.__getitems__(indices))
    assert batch["inputs"].shape == (5, 2, 16)
    Reference([roots[0], longer]).check(batch, indices, window=16)
    mixed.set_epoch(4)
    assert [dataset.epoch for dataset in cut] == [4, 4] and mixed.epoch == 4
    unbounded = SDSTorchDataset(longer, targets={"index": "index"}, window=Window("a1", None, pad=True))
    with pytest.raises(ValueError, match=r"member 1 .*give the window a length"):
        Mixture([cut[0], unbounded], [1, 1])


def test_members_must_agree_on_keys_and_dtypes(roots: tuple[str, str]) -> None:
    first = SDSTorchDataset(roots[0], targets={"index": "index"})
    with pytest.raises(
        ValueError,
        match=(
            r"member 1 \(.*second\) delivers keys \['index', 'inputs'\]"
            r".*1 lacks \['target'\].*inputs=, target="
        ),
    ):
        Mixture([first, SDSTorchDataset(roots[1], target=None, targets={"index": "index"})], [1, 1])
    with pytest.raises(
        ValueError, match=r"member 1 .* delivers 'target' as float64 \(\), member 0 .* as int64 \(\)"
    ):
        Mixture([first, SDSTorchDataset(roots[1], target="snr_db", targets={"index": "index"})], [1, 1])


def test_a_member_whose_records_change_shape_is_named(roots: tuple[str, str], tmp_path) -> None:
    varying = tmp_path / "varying"
    write_dataset(
        varying, 20, lambda i: make(i, base=3000, samples=32 if i < 10 else 48), records_per_shard=10
    )
    mixed = Mixture(
        [
            SDSTorchDataset(roots[0], targets={"index": "index"}),
            SDSTorchDataset(str(varying), targets={"index": "index"}),
        ],
        [1, 1],
    )  # record 0 of each member agrees: (2, 32)
    Reference([roots[0], str(varying)]).check(collate(mixed.__getitems__([1, 121, 120])), [1, 121, 120])
    with pytest.raises(
        ValueError,
        match=(
            r"mixture member 1 \(.*varying\): out\['samples'\] has shape \(2, 2, 32\); "
            r"this batch needs \(2, 2, 48\).*Window of one length"
        ),
    ):
        mixed.__getitems__([0, 130, 131])
    with pytest.raises(MixedShapesError, match="mixes record layouts") as raised:
        mixed.__getitems__([125, 135])
    assert any("mixture member 1" in note for note in raised.value.__notes__)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (("x", [1]), {}, TypeError, "sequence of SDSTorchDataset"),
        (([], []), {}, ValueError, "at least one dataset"),
        ((["uri"], [1]), {}, TypeError, r"member 0 is a str.*SDSTorchDataset\(uri"),
        ((None, [1]), {}, ValueError, "weights has 1 entries for 2 datasets"),
        ((None, [1, -1]), {}, ValueError, "weight 1 is -1; weights must be finite and zero or more"),
        ((None, [0, 0]), {}, ValueError, "sum to 0"),
        ((None, [1, "2"]), {}, TypeError, "weight 1 is '2'"),
        ((None, [1, 1]), {"epoch_size": 0}, ValueError, "epoch_size must be a positive integer"),
        ((None, [1, 1]), {"seed": -2}, ValueError, "seed must be a non-negative integer"),
    ],
)
def test_bad_arguments_say_what_to_do(
    roots: tuple[str, str], args: tuple, kwargs: dict, error: type, match: str
) -> None:
    datasets, weights = args
    if datasets is None:
        datasets = [SDSTorchDataset(root) for root in roots]
    with pytest.raises(error, match=match):
        Mixture(datasets, weights, **kwargs)


def test_a_batch_of_batches_points_at_batch_sampler(roots: tuple[str, str]) -> None:
    mixed = mixture(roots)
    sampler = MixtureSampler(mixed, 8)
    loader = DataLoader(mixed, batch_size=4, sampler=sampler, collate_fn=collate)  # the mistake
    with pytest.raises(TypeError, match="pass it to the DataLoader as batch_sampler="):
        next(iter(loader))
    with pytest.raises(TypeError, match="draws from a sds_loader.torch.Mixture, not a SDSTorchDataset"):
        MixtureSampler(mixed.datasets[0], 8)  # type: ignore[arg-type]


# -- the sampler's counts -------------------------------------------------------


def member_counts(batches: Sequence[Sequence[int]], boundary: int = SIZES[0]) -> np.ndarray:
    return np.array([[sum(i < boundary for i in b), sum(i >= boundary for i in b)] for b in batches])


@pytest.mark.parametrize("weights", [(0.7, 0.3), (0.5, 0.5), (0.9, 0.1), (1, 3)])
def test_every_epoch_and_every_batch_holds_each_member_by_its_weight(
    roots: tuple[str, str], weights: tuple
) -> None:
    mixed = mixture(roots, weights, epoch_size=2000)
    share = np.asarray(weights, dtype=float) / sum(weights)
    sampler = MixtureSampler(mixed, 256)
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert [len(b) for b in batches] == [256] * 7 + [2000 - 7 * 256]
        counts = member_counts(batches)
        sizes = np.array([len(b) for b in batches])[:, None]
        assert np.abs(counts - sizes * share).max() <= 1, counts
        assert np.abs(counts.sum(axis=0) - 2000 * share).max() <= 1, counts.sum(axis=0)
        # Each batch lists member 0's records, then member 1's.
        for batch in batches:
            members = [int(i >= SIZES[0]) for i in batch]
            assert members == sorted(members)


def test_quotas_stay_within_one_for_many_members_and_sizes() -> None:
    rng = np.random.default_rng(1)
    for _ in range(300):
        members = int(rng.integers(2, 6))
        weights = rng.random(members) ** 3
        weights /= weights.sum()
        batch, total = int(rng.integers(1, 300)), int(rng.integers(1, 3000))
        sizes = [batch] * (total // batch) + ([total % batch] if total % batch else [])
        quotas = batch_quotas(weights, sizes)
        assert (quotas.sum(axis=1) == sizes).all()
        assert np.abs(quotas - np.outer(sizes, weights)).max() < 1
        assert np.abs(quotas.sum(axis=0) - total * weights).max() < 1


def test_members_are_drawn_without_replacement_until_exhausted(roots: tuple[str, str]) -> None:
    # 0.7 of 300 = 210 records of member 0 (120: upsampled), 90 of member 1 (50).
    mixed = mixture(roots, epoch_size=300)
    sampler = MixtureSampler(mixed, 32, run_length=4, runs_mixed=2)
    streams: list[list[int]] = [[], []]
    for epoch in range(5):
        sampler.set_epoch(epoch)
        for batch in sampler:
            for index in batch:
                streams[int(index >= SIZES[0])].append(index)
    assert [len(s) for s in streams] == [5 * 210, 5 * 90]
    for member, stream in enumerate(streams):
        size, offset = SIZES[member], (0, SIZES[0])[member]
        passes = [stream[k : k + size] for k in range(0, len(stream) - size + 1, size)]
        assert len(passes) >= 8
        for each in passes:  # every whole pass through a member is a permutation of it
            assert sorted(each) == list(range(offset, offset + size))
        assert len({tuple(each) for each in passes}) == len(passes)  # each a new permutation


def test_members_are_read_in_runs_of_neighbouring_records(roots: tuple[str, str]) -> None:
    mixed = mixture(roots)
    sampler = MixtureSampler(mixed, 64, run_length=4, runs_mixed=4)
    for member, length in enumerate(SIZES):
        stream = sampler.member_stream(member, 0, length)
        assert sorted(stream.tolist()) == list(range(length))
        # Shards hold 40 and 16 records: runs of 4 are aligned, 4 runs share each stretch of 16
        # (member 1's last shard holds 2 records, a short run, which shifts later runs across
        # stretch boundaries: a stretch then spans 5 runs).
        runs = [len(set((stream[k : k + 16] // 4).tolist())) for k in range(0, length - length % 16, 16)]
        assert all(count == 4 if member == 0 else count <= 5 for count in runs), runs
        assert np.abs(np.diff(stream)).mean() > 4  # and the stretches are mixed
    same = ShardAwareSampler(mixed.datasets[1], run_length=4, runs_mixed=4)
    assert sampler._members[1].runs == same.runs


def test_order_is_a_function_of_seed_and_epoch(roots: tuple[str, str]) -> None:
    mixed = mixture(roots, seed=3)
    first, again = MixtureSampler(mixed, 16), MixtureSampler(mixture(roots, seed=3), 16)
    assert first.seed == 3 and list(first) == list(again)
    other_seed = MixtureSampler(mixed, 16, seed=4)
    assert list(other_seed) != list(first)
    epoch0 = list(first)
    first.set_epoch(1)
    assert list(first) != epoch0
    ordered = MixtureSampler(mixed, 16, shuffle=False)
    assert [i for b in ordered for i in b if i < SIZES[0]][:10] == list(range(10))


@pytest.mark.parametrize("replicas", [2, 3])
def test_ranks_take_whole_batches_and_cover_the_epoch(roots: tuple[str, str], replicas: int) -> None:
    mixed = mixture(roots)
    whole = list(MixtureSampler(mixed, 16, num_replicas=1, rank=0))
    ranks = [list(MixtureSampler(mixed, 16, num_replicas=replicas, rank=r)) for r in range(replicas)]
    per_rank = -(-len(whole) // replicas)
    assert [len(r) for r in ranks] == [per_rank] * replicas
    assert {tuple(b) for r in ranks for b in r} == {tuple(b) for b in whole}
    dropped = [
        list(MixtureSampler(mixed, 16, num_replicas=replicas, rank=r, drop_last=True))
        for r in range(replicas)
    ]
    assert all(len(r) == (len(whole) - 1) // replicas for r in dropped)
    assert all(len(b) == 16 for r in dropped for b in r)


# -- resume -----------------------------------------------------------------------


@pytest.mark.parametrize("stop", [0, 1, 5, 10, 11])
def test_state_dict_resumes_after_any_batch(roots: tuple[str, str], stop: int) -> None:
    mixed = mixture(roots)
    sampler = MixtureSampler(mixed, 16, seed=9)
    sampler.set_epoch(2)
    full = list(sampler)
    assert len(full) == 11
    iterator = iter(sampler)
    seen = [next(iterator) for _ in range(stop)]
    restored = MixtureSampler(mixture(roots), 16)
    restored.load_state_dict(sampler.state_dict())
    restored.set_epoch(2)
    assert seen + list(restored) == full
    with pytest.raises(ValueError, match=r"batch_size: saved 16, now 8"):
        MixtureSampler(mixed, 8).load_state_dict(sampler.state_dict())
    with pytest.raises(ValueError, match=r"weights: saved \[0.7, 0.3"):
        MixtureSampler(mixture(roots, (0.5, 0.5)), 16).load_state_dict(sampler.state_dict())


def rows(loader: object, count: int | None = None) -> list[list[int]]:
    got = []
    for batch in loader:  # type: ignore[attr-defined]
        got.append(batch["index"].tolist())
        if count is not None and len(got) == count:
            break
    return got


def indices_of(batches: Sequence[Sequence[int]]) -> list[list[int]]:
    """The "index" metadata of each mixture index of `batches`."""
    return [[i if i < SIZES[0] else SECOND + i - SIZES[0] for i in batch] for batch in batches]


def test_resume_through_stateful_dataloader_with_workers(roots: tuple[str, str]) -> None:
    stateful = pytest.importorskip("torchdata.stateful_dataloader")

    def make_loader() -> object:
        mixed = mixture(roots)
        sampler = MixtureSampler(mixed, 8, seed=1, readahead=8)
        sampler.set_epoch(1)
        return stateful.StatefulDataLoader(
            mixed,
            batch_sampler=sampler,
            collate_fn=collate,
            num_workers=2,
            multiprocessing_context="fork",
        )

    full = rows(make_loader())
    interrupted = make_loader()
    head = rows(interrupted, 7)  # the workers have read ahead of this by now
    state = interrupted.state_dict()  # type: ignore[attr-defined]
    del interrupted
    resumed = make_loader()
    resumed.load_state_dict(state)  # type: ignore[attr-defined]
    assert head + rows(resumed) == full
    sampler = MixtureSampler(mixture(roots), 8, seed=1)
    sampler.set_epoch(1)
    assert full == indices_of(list(sampler))


# -- DataLoader workers -------------------------------------------------------------


def report_worker(batch: object) -> dict[str, object]:
    info = get_worker_info()
    assert info is not None and isinstance(batch, Batch)
    out: dict[str, object] = dict(collate(batch))
    out["worker_buffers"] = info.dataset.buffers
    out["worker_threads"] = [dataset.reader.threads for dataset in info.dataset.datasets]
    out["worker_pid"] = os.getpid()
    out["worker_in_ring"] = batch._ring_block is not None
    return out


@pytest.mark.parametrize(("context", "workers"), [("fork", 2), ("spawn", 1)])
def test_workers_deliver_the_same_bytes(roots: tuple[str, str], context: str, workers: int) -> None:
    mixed = mixture(roots)
    sampler = MixtureSampler(mixed, 24, seed=2)
    expected = list(sampler)
    loader = DataLoader(
        mixed,
        batch_sampler=sampler,
        num_workers=workers,
        collate_fn=report_worker,
        multiprocessing_context=context,
        persistent_workers=True,
    )
    reference = Reference(roots)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        expected = list(sampler)
        batches = list(loader)
        assert len(batches) == len(expected) == 8
        for batch, indices in zip(batches, expected, strict=True):
            assert batch["worker_buffers"] == "ring" and batch["worker_threads"] == [1, 1]
            assert batch["worker_pid"] != os.getpid()
            reference.check(batch, indices)  # type: ignore[arg-type]
        # Each worker's first batch sizes its ring; later ones of that size go into it.
        assert sum(bool(batch["worker_in_ring"]) for batch in batches) >= len(batches) - workers - 1
    assert mixed.buffers == "pool"


# -- readahead -------------------------------------------------------------------


class Announced(Mixture):
    """A Mixture that also keeps every announcement made to it."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.announced: list[int] = []

    def will_need(self, indices: Sequence[int] | np.ndarray) -> int:
        self.announced.extend(int(i) for i in indices)
        return super().will_need(indices)


@pytest.mark.parametrize(("readahead", "start"), [(0, 0), (5, 0), (16, 3), (1000, 2)])
def test_each_batch_announces_what_follows_it(roots: tuple[str, str], readahead: int, start: int) -> None:
    members = [SDSTorchDataset(root, targets={"index": "index"}) for root in roots]
    mixed = Announced(members, [0.7, 0.3])
    sampler = MixtureSampler(mixed, 16, readahead=readahead)
    items = sampler.rank_items()
    flat = [i for batch in items[start:] for i in batch]
    sampler.load_state_dict({**sampler.state_dict(), "consumed": start})
    handed = 0
    for position, batch in enumerate(sampler, start):
        assert batch == items[position]
        handed += len(batch)
        expected = 0 if readahead == 0 else min(len(flat), handed + readahead)
        assert mixed.announced == flat[:expected]
    assert mixed.will_need([0, 1, 150]) > 0  # announced to the members that hold them


# -- a member in object storage ----------------------------------------------------


def test_a_local_and_a_remote_member_mix(roots: tuple[str, str], rclone_server: object) -> None:
    remote = upload_dataset(rclone_server, roots[1], "mixture-second")  # type: ignore[arg-type]
    mixed = mixture([roots[0], remote])
    sampler = MixtureSampler(mixed, 32, seed=4)
    reference = Reference([roots[0], remote])
    batches = list(sampler)
    scattered = [i for batch in batches[:2] for i in reversed(batch)]
    for indices in (batches[0], batches[-1], scattered):
        reference.check(collate(mixed.__getitems__(indices)), indices)
    assert (
        mixed.datasets[1].reader.stats.native_records > 0
        and mixed.datasets[1].reader.stats.fetch_requests > 0
    )
    # A spawned worker gets the member's store settings, not this process's registry.
    loader = DataLoader(
        mixed, batch_sampler=sampler, num_workers=1, collate_fn=collate, multiprocessing_context="spawn"
    )
    for batch, indices in zip(loader, batches, strict=True):
        reference.check(batch, indices)
