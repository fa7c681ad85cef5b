"""ShardAwareSampler announces each stretch's successors before yielding it, and changes no byte."""

from __future__ import annotations

import torch_required  # noqa: F401 - skips this module without torch

import functools

import numpy as np
import pytest
from sds_factory import assert_matches_reference, capture, write_dataset
from torch.utils.data import DataLoader

from sds_loader.samplers import ShardAwareSampler
from sds_loader.torch import SDSTorchDataset, collate

RECORDS = 100


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("sampler-readahead") / "captures"
    write_dataset(path, RECORDS, functools.partial(capture, samples=64), records_per_shard=30)
    return str(path)


class Recording:
    """A dataset that keeps every announcement made to it, in order."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.announced: list[list[int]] = []

    def will_need(self, items) -> int:
        self.announced.append(list(items))
        return 0


def flat(announced: list[list[int]]) -> list[int]:
    return [item for items in announced for item in items]


@pytest.mark.parametrize("readahead", [0, 5, 8, 30, 200])
@pytest.mark.parametrize("start", [0, 13])
def test_each_stretch_announces_what_follows_it(root, readahead, start) -> None:
    dataset = Recording(root)
    sampler = ShardAwareSampler(dataset, seed=4, run_length=2, runs_mixed=4, readahead=readahead)
    stretch = 8
    sampler.load_state_dict({**sampler.state_dict(), "consumed": start})
    items = sampler.rank_items()
    for position, item in enumerate(sampler, start):
        assert item == items[position]
        if readahead == 0:
            assert dataset.announced == []
            continue
        # Everything from the resume point up to this stretch's end plus the readahead.
        this_stretch_end = start + ((position - start) // stretch + 1) * stretch
        assert flat(dataset.announced) == items[start : min(len(items), this_stretch_end + readahead)]
    assert flat(dataset.announced) == ([] if readahead == 0 else items[start:])


def test_default_readahead_is_two_stretches_and_left_out_of_the_state(root) -> None:
    sampler = ShardAwareSampler(Recording(root), run_length=4, runs_mixed=3)
    assert sampler.readahead == 24
    assert (
        ShardAwareSampler(Recording(root), run_length=4, runs_mixed=3, readahead=0).state_dict()
        == sampler.state_dict()
    )
    with pytest.raises(ValueError, match="readahead must be zero or more"):
        ShardAwareSampler(root, readahead=-1)


def test_a_uri_takes_no_announcements(root) -> None:
    assert ShardAwareSampler(root)._announce is None
    assert len(list(ShardAwareSampler(root))) == RECORDS


def test_workers_read_the_same_bytes_with_and_without_readahead(root) -> None:
    dataset = SDSTorchDataset(root)

    def epoch(readahead):
        sampler = ShardAwareSampler(dataset, seed=2, run_length=4, runs_mixed=4, readahead=readahead)
        order = sampler.rank_items()
        loader = DataLoader(dataset, batch_size=16, sampler=sampler, collate_fn=collate, num_workers=2)
        batches = [{key: value.numpy().copy() for key, value in batch.items()} for batch in loader]
        return order, batches

    order, batches = epoch(None)
    same_order, without = epoch(0)
    assert order == same_order
    for k, (batch, plain) in enumerate(zip(batches, without, strict=True)):
        indices = order[16 * k : 16 * (k + 1)]
        assert np.array_equal(batch["inputs"], plain["inputs"])
        assert_matches_reference(
            root, {"samples": batch["inputs"], "label": batch["target"]}, indices, ["samples"], ["label"]
        )
