"""LengthBucketSampler: batches of similar length from record metadata, under the
samplers' shared contract (order per seed and epoch, rank partitions, exact resume)."""

from __future__ import annotations

import torch_required  # noqa: F401 - skips this module without torch

import numpy as np
import pytest
import signal_dataset as sds
from sds_factory import write_dataset
from torch.utils.data import DataLoader

from sds_loader import Window
from sds_loader.samplers.length_bucket import padding_waste
from sds_loader.torch import LengthBucketSampler, SDSTorchDataset, collate

RECORDS = 600
BATCH = 16


def spread_length(ordinal: int) -> int:
    """Lengths spread 1:10 (20 to 200), in no order related to the ordinal."""
    return 20 + (ordinal * 7919) % 181


def short_capture(ordinal: int) -> sds.Record:
    n = spread_length(ordinal)
    data = np.full((1, n), ordinal, dtype=np.int16)
    axes = (sds.Axis("channel", 1), sds.Axis("time", n))
    return sds.Record(
        id=f"s{ordinal}", fields={"samples": sds.Field(data, axes=axes)}, metadata={"label": ordinal}
    )


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("length-bucket")
    write_dataset(
        path, RECORDS, short_capture, records_per_shard=250, writer_options="group_size:1,uncompressed"
    )
    return str(path)


def test_lengths_come_from_record_metadata(root):
    sampler = LengthBucketSampler(root, BATCH)
    metadata = sds.open(root).record_metadata
    assert sampler.lengths.tolist() == [metadata[i]["samples"].shape[1] for i in range(RECORDS)]
    assert sampler.lengths.tolist() == [spread_length(i) for i in range(RECORDS)]
    assert not sampler.lengths.flags.writeable


@pytest.mark.parametrize("shuffle", [True, False])
def test_every_ordinal_once_in_batches_of_similar_length(root, shuffle):
    sampler = LengthBucketSampler(root, BATCH, shuffle=shuffle, seed=1)
    batches = list(sampler)
    assert len(batches) == len(sampler) == -(-RECORDS // BATCH)
    assert sorted(o for batch in batches for o in batch) == list(range(RECORDS))
    assert sorted(map(len, batches)) == [RECORDS % BATCH] + [BATCH] * (len(batches) - 1)
    random_batches = [list(range(k, min(k + BATCH, RECORDS))) for k in range(0, RECORDS, BATCH)]
    lengths = sampler.lengths
    bucketed, random = padding_waste(batches, lengths), padding_waste(random_batches, lengths)
    assert random > 0.35
    assert bucketed < random / 5, (bucketed, random)


def test_order_is_a_function_of_seed_and_epoch(root):
    one = LengthBucketSampler(root, BATCH, seed=4)
    two = LengthBucketSampler(root, BATCH, seed=4)
    first = list(one)
    assert list(two) == first
    one.set_epoch(1)
    second = list(one)
    assert second != first
    assert sorted(map(sorted, second)) != sorted(map(sorted, first))  # new batch-mates, not only a new order
    assert list(LengthBucketSampler(root, BATCH, seed=5)) != first
    assert list(LengthBucketSampler(root, BATCH, shuffle=False)) == list(
        LengthBucketSampler(root, BATCH, shuffle=False, seed=9)
    )


def test_drop_last_drops_the_short_batch(root):
    sampler = LengthBucketSampler(root, BATCH, drop_last=True, seed=2)
    batches = list(sampler)
    assert len(batches) == RECORDS // BATCH
    assert all(len(batch) == BATCH for batch in batches)


def test_ranks_take_disjoint_whole_batches(root):
    ranks = [LengthBucketSampler(root, BATCH, num_replicas=3, rank=r, seed=6) for r in range(3)]
    per_rank = [list(sampler) for sampler in ranks]
    assert {len(batches) for batches in per_rank} == {len(ranks[0])} == {13}  # ceil(38 / 3)
    everything = [o for batches in per_rank for batch in batches for o in batch]
    assert set(everything) == set(range(RECORDS))
    whole = list(LengthBucketSampler(root, BATCH, seed=6))
    # The ranks take the epoch's batches in turn, a step at a time, padded with its first.
    assert [batches[step] for step in range(13) for batches in per_rank] == whole + whole[:1]


def test_state_dict_resumes_exactly(root):
    sampler = LengthBucketSampler(root, BATCH, seed=8)
    sampler.set_epoch(3)
    expected = list(sampler)
    iterator = iter(sampler)
    taken = [next(iterator) for _ in range(5)]
    state = sampler.state_dict()
    restored = LengthBucketSampler(root, BATCH, seed=0)
    restored.load_state_dict(state)
    assert taken + list(restored) == expected
    with pytest.raises(ValueError, match="batch_size: saved 16, now 8"):
        LengthBucketSampler(root, 8).load_state_dict(state)


def test_padded_batches_through_a_dataloader(root):
    dataset = SDSTorchDataset(root, window=Window("time", None, pad=True))
    sampler = LengthBucketSampler(dataset, BATCH, seed=3)
    loader = DataLoader(dataset, batch_sampler=sampler, collate_fn=collate)
    seen = 0
    for batch in loader:
        ordinals = batch["target"].numpy()
        lengths = np.asarray([spread_length(int(o)) for o in ordinals])
        assert batch["inputs"].shape == (len(ordinals), 1, lengths.max())
        assert batch["inputs_length"].tolist() == lengths.tolist()
        for row, ordinal in enumerate(ordinals.tolist()):
            assert (batch["inputs"][row, 0, : lengths[row]] == ordinal).all()
            assert not batch["inputs"][row, 0, lengths[row] :].any()
        seen += len(ordinals)
    assert seen == RECORDS


def test_arguments(root):
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        LengthBucketSampler(root, 0)
    with pytest.raises(ValueError, match="pool_batches must be a positive integer"):
        LengthBucketSampler(root, 4, pool_batches=0)
    with pytest.raises(ValueError, match="has no field with axis 'frequency'"):
        LengthBucketSampler(root, 4, axis="frequency")
    with pytest.raises(TypeError, match="needs an SDSTorchDataset, a BatchReader or a dataset URI"):
        LengthBucketSampler([1, 2, 3], 4)
