"""ShardAwareSampler and LengthBucketSampler over a torch Subset (a split) of an SDSTorchDataset."""

from __future__ import annotations

import torch_required  # noqa: F401 - skips this module without torch

from collections.abc import Sequence

import numpy as np
import pytest
from annotation_factory import record_length, write_annotated
from sds_factory import write_dataset
from torch.utils.data import DataLoader, Subset

from sds_loader import Window
from sds_loader.torch import LengthBucketSampler, SDSTorchDataset, ShardAwareSampler, collate


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("subsets") / "captures.sds")
    write_dataset(path, 600, records_per_shard=150)
    return path


def split(root: str) -> np.ndarray:
    """Two records in three, as a metadata split would pick them, in no stored order."""
    members = np.asarray([i for i in range(600) if i % 3 != 2], dtype=np.int64)
    return np.random.default_rng(0).permutation(members)


class Recording(SDSTorchDataset):
    """Counts what the sampler announces (the ordinals it passes to will_need)."""

    announced: list[int]

    def will_need(self, indices: Sequence[int]) -> int:
        self.announced = getattr(self, "announced", []) + [int(i) for i in indices]
        return super().will_need(indices)


def test_every_subset_position_once_in_runs_of_stored_neighbours(root: str) -> None:
    dataset = Recording(root)
    members = split(root)
    subset = Subset(dataset, members.tolist())
    sampler = ShardAwareSampler(subset, seed=1, run_length=8, runs_mixed=4, readahead=64)
    positions = list(sampler)
    assert sorted(positions) == list(range(len(members)))
    ordinals = members[positions]
    # Each stretch of run_length * runs_mixed = 32 positions draws from at most 4 runs: its
    # records fall in at most 4 groups of 8 neighbours among the subset's (sorted) ordinals.
    rank_of = {int(o): r for r, o in enumerate(np.sort(members))}

    def groups(order: np.ndarray) -> list[int]:
        return [
            len({rank_of[int(o)] // 8 for o in order[first : first + 32]})
            for first in range(0, len(order) - len(order) % 32, 32)
        ]

    # Runs are cut at shard ends too, so a short run shifts the rest: a stretch
    # meets a few more than 4 groups, where a uniform shuffle meets about 25.
    assert max(groups(ordinals)) <= 8 and np.mean(groups(ordinals)) <= 6
    assert np.mean(groups(np.random.default_rng(0).permutation(members))) > 20
    # The announcements are ordinals of the dataset, not subset positions.
    assert set(dataset.announced) == set(members.tolist())
    unshuffled = list(ShardAwareSampler(subset, shuffle=False))
    assert members[unshuffled].tolist() == sorted(members.tolist())


def test_a_loader_over_the_subset_reads_exactly_its_records(root: str) -> None:
    dataset = SDSTorchDataset(root, inputs="samples", target="label", extras=("ordinal",))
    members = split(root)[:100]
    subset = Subset(dataset, members.tolist())
    sampler = ShardAwareSampler(subset, seed=2)
    loader = DataLoader(subset, batch_size=32, sampler=sampler, collate_fn=collate)
    read = [int(o) for batch in loader for o in batch["ordinal"]]
    assert read == members[list(sampler)].tolist()
    assert sorted(read) == sorted(members.tolist())


@pytest.fixture(scope="module")
def varied(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("varied") / "captures.sds")
    write_annotated(path)
    return path


def test_length_buckets_of_a_subset_are_its_positions_by_length(varied: str) -> None:
    dataset = SDSTorchDataset(varied, target=None, window=Window("time", None, pad=True))
    members = [20, 3, 11, 7, 15, 0, 9]
    subset = Subset(dataset, members)
    sampler = LengthBucketSampler(subset, 3, shuffle=False)
    assert sampler.lengths.tolist() == [record_length(m) for m in members]
    batches = list(sampler)
    assert sorted(p for b in batches for p in b) == list(range(len(members)))
    by_length = sorted(range(len(members)), key=lambda p: record_length(members[p]))
    assert [p for b in batches for p in b] == by_length
    loaded = list(DataLoader(subset, batch_sampler=sampler, collate_fn=collate))
    assert [int(b["inputs_length"].max()) for b in loaded] == [
        max(record_length(members[p]) for p in b) for b in batches
    ]
