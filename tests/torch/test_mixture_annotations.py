"""A Mixture's batches carry its members' annotation rows, labels and extras.

Member 0 is a dataset with the annotation set ``bursts``; member 1 is a view
published from it (another order, every other record), which signal_dataset
gives its own ``bursts`` rows. Every row of a mixed batch is compared with
signal_dataset's reader of the member that holds it: the record's window, its
class, id and ordinal in the member, the row's status and its items.
"""

from __future__ import annotations

from torch_required import torch

import multiprocessing
import os
from typing import Any

import numpy as np
import pytest
import signal_dataset as sds
from annotation_factory import COUNT, MODULATIONS, write_annotated
from native_required import _native  # noqa: F401 - a build without it fails the run (conftest.py)
from torch.utils.data import DataLoader

from sds_loader import Annotations, Window
from sds_loader.torch import Mixture, MixtureSampler, SDSTorchDataset, collate

WINDOW = Window("time", 150, crop="random")
FIELDS = ("intervals", "freq")
STATUS = {"success": 0, "skipped": 1, "failed": 2}
PICKED = list(range(COUNT - 1, -1, -2))
CONTEXTS = [c for c in ("fork", "spawn") if c in multiprocessing.get_all_start_methods()]


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    folder = tmp_path_factory.mktemp("mixture_annotations")
    first, view = os.fspath(folder / "first"), os.fspath(folder / "view")
    write_annotated(first)
    sds.open(first).select(PICKED).publish(view, dataset_id="view", snapshot_id="v1")
    return first, view


def member(root: str, *, max_items: int | None = None, **kwargs: Any) -> SDSTorchDataset:
    options: dict[str, Any] = {
        "target": "modulation",
        "labels": {"modulation": MODULATIONS},
        "window": WINDOW,
        "annotations": [Annotations("bursts", FIELDS, max_items=max_items, pad_value=-1)],
        "extras": ("ordinal", "id", "start"),
    }
    options.update(kwargs)
    return SDSTorchDataset(root, **options)


def mixed(roots: tuple[str, str], **kwargs: Any) -> Mixture:
    return Mixture([member(root, **kwargs) for root in roots], [0.6, 0.4])


def check(mixture: Mixture, indices: list[int], batch: dict[str, Any], padded: bool) -> None:
    """Every row against signal_dataset's reader of the member holding it."""
    members, records = mixture.locate(indices)
    opened = [sds.open(dataset.uri) for dataset in mixture.datasets]
    assert batch["ordinal"].tolist() == records.tolist()
    for k, (m, j) in enumerate(zip(members.tolist(), records.tolist(), strict=True)):
        dataset = mixture.datasets[m]
        record, row = opened[m][j], opened[m].annotations["bursts"][j]
        start = int(dataset.reader.window_starts([j], seed=0, epoch=mixture.epoch)[0])
        assert int(batch["start"][k]) == start
        assert batch["inputs"][k].numpy().tobytes() == record["samples"].data[start : start + 150].tobytes()
        assert MODULATIONS[int(batch["target"][k])] == record.metadata["modulation"]
        assert batch["id"][k] == record.id == row.source_record_id
        assert int(batch["bursts.status"][k]) == STATUS[row.status.value]
        for name in FIELDS:
            if padded:
                count = int(batch["bursts.count"][k])
                got = batch[f"bursts.{name}"][k, :count]
                assert (batch[f"bursts.{name}"][k, count:] == -1).all()
            else:
                offsets = batch["bursts.offsets"]
                got = batch[f"bursts.{name}"][int(offsets[k]) : int(offsets[k + 1])]
            want = row.fields[name].data if row.status.value == "success" and name in row.fields else None
            if want is None:
                assert got.shape[0] == 0, (m, j, name)
            else:
                assert got.numpy().dtype == want.dtype and got.numpy().tobytes() == want.tobytes(), (m, j)


@pytest.mark.parametrize("padded", [False, True], ids=["ragged", "padded"])
@pytest.mark.parametrize("order", ["members-together", "scattered"])
def test_a_mixed_batch_carries_each_members_rows(roots: tuple[str, str], padded: bool, order: str) -> None:
    mixture = mixed(roots, max_items=6 if padded else None)
    second = int(mixture.offsets[1])
    indices = [3, 0, 22, 11, second + 4, second + 0, second + 11, second + 7]
    if order == "scattered":
        indices = [int(i) for i in np.random.default_rng(2).permutation(indices)]
    batch = collate(mixture.__getitems__(indices))
    assert isinstance(batch, dict)
    check(mixture, indices, batch, padded)
    assert set(mixture.keys) == set(batch)
    if not padded:
        assert int(batch["bursts.offsets"][-1]) == batch["bursts.intervals"].shape[0]
    # A sample of the batch is that member's own sample.
    sample = mixture[second + 4]
    alone = mixture.datasets[1][4]
    for key, value in alone.items():
        got = sample[key]
        assert (got == value) if isinstance(value, str) else torch.equal(got, value), key


@pytest.mark.parametrize("context", CONTEXTS)
def test_mixed_batches_through_workers(roots: tuple[str, str], context: str) -> None:
    mixture = mixed(roots)
    sampler = MixtureSampler(mixture, batch_size=6, seed=3)
    loader = DataLoader(
        mixture, batch_sampler=sampler, num_workers=2, collate_fn=collate, multiprocessing_context=context
    )
    batches = 0
    for indices, batch in zip(list(sampler), loader, strict=True):
        check(mixture, indices, batch, padded=False)
        batches += 1
    assert batches == len(sampler) > 1


def test_members_that_deliver_other_keys_are_refused_naming_the_member_and_keys(
    roots: tuple[str, str],
) -> None:
    first, view = roots
    with pytest.raises(ValueError, match=r"member 1 .*lacks \['bursts\.freq', 'bursts\.intervals'") as raised:
        Mixture([member(first), member(view, annotations=[])], [1, 1])
    assert "annotations=" in str(raised.value)
    with pytest.raises(ValueError, match=r"member 1 .*lacks \['start'\]"):
        Mixture([member(first), member(view, extras=("ordinal", "id"))], [1, 1])
    with pytest.raises(ValueError, match=r"member 1 .*lacks \['bursts\.offsets'\].*adds \['bursts\.count'\]"):
        Mixture([member(first), member(view, max_items=6)], [1, 1])
    with pytest.raises(ValueError, match=r"member 1 .*'target'.*classes \['fm', 'bpsk', 'qpsk'\].*labels="):
        Mixture([member(first), member(view, labels={"modulation": ["fm", "bpsk", "qpsk"]})], [1, 1])
    with pytest.raises(ValueError, match=r"member 1 .*'target' as a metadata number"):
        Mixture([member(first), member(view, target="label", labels=None)], [1, 1])
