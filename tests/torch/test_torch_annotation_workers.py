"""Annotation rows and extras through real DataLoader workers, checked against signal_dataset.

Every row of every batch is compared with signal_dataset's own
``AnnotationSet[ordinal]`` and record: status, items (ragged with offsets, or
padded with counts), id, ordinal and window start. Workers are forked and
spawned; batches go through the pin step; and a `ShardAwareSampler` saved
mid-epoch resumes with the rows an uninterrupted run yields.
"""

from __future__ import annotations

from torch_required import torch

import multiprocessing
import warnings
from typing import Any

import numpy as np
import pytest
import signal_dataset as sds
from annotation_factory import COUNT, write_annotated
from native_required import _native  # noqa: F401 - a build without it fails the run (conftest.py)
from torch.utils.data import DataLoader
from torchdata.stateful_dataloader import StatefulDataLoader

from sds_loader import Annotations, Window
from sds_loader.torch import SDSTorchDataset, ShardAwareSampler, collate

WINDOW = Window("time", 120, crop="random")
SEED = 4
STATUS = {"success": 0, "skipped": 1, "failed": 2}
FIELDS = ("intervals", "freq")
#: Ragged (items with offsets) and padded (K slots with counts).
MODES = {"ragged": None, "padded": 6}
CONTEXTS = [c for c in ("fork", "spawn") if c in multiprocessing.get_all_start_methods()]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("annotation_workers") / "captures.sds")
    write_annotated(path)
    return path


@pytest.fixture(scope="module")
def truth(root: str) -> tuple[sds.Dataset, Any]:
    opened = sds.open(root)
    return opened, opened.annotations["bursts"]


def make(root: str, mode: str) -> SDSTorchDataset:
    return SDSTorchDataset(
        root,
        target="modulation",
        window=WINDOW,
        seed=SEED,
        annotations=[Annotations("bursts", FIELDS, max_items=MODES[mode], pad_value=-3)],
        extras=("ordinal", "id", "start"),
    )


def rows_of(batch: dict[str, Any], mode: str) -> list[dict[str, Any]]:
    """Each row's ordinal, id, start, status and items, as plain Python values."""
    out = []
    for k, ordinal in enumerate(batch["ordinal"].tolist()):
        row: dict[str, Any] = {
            "ordinal": ordinal,
            "id": batch["id"][k],
            "start": int(batch["start"][k]),
            "status": int(batch["bursts.status"][k]),
        }
        for name in FIELDS:
            values = batch[f"bursts.{name}"]
            if mode == "ragged":
                offsets = batch["bursts.offsets"]
                items = values[int(offsets[k]) : int(offsets[k + 1])]
            else:
                count = int(batch["bursts.count"][k])
                assert (values[k, count:] == -3).all(), (ordinal, name)
                items = values[k, :count]
            array = items.numpy()
            row[name] = (str(array.dtype), array.shape, array.tobytes())
        out.append(row)
    return out


def check_rows(rows: list[dict[str, Any]], truth: tuple[sds.Dataset, Any], dataset: SDSTorchDataset) -> None:
    """Every row against signal_dataset's record and annotation row of its ordinal."""
    opened, annotations = truth
    starts = dataset.reader.window_starts([row["ordinal"] for row in rows], seed=SEED, epoch=dataset.epoch)
    for row, start in zip(rows, starts.tolist(), strict=True):
        record, annotation = opened[row["ordinal"]], annotations[row["ordinal"]]
        assert row["id"] == record.id == annotation.source_record_id
        assert row["start"] == start
        assert row["status"] == STATUS[annotation.status.value]
        for name in FIELDS:
            dtype, shape, data = row[name]
            if annotation.status.value != "success" or name not in annotation.fields:
                assert shape[0] == 0, (row["ordinal"], name)
                continue
            want = annotation.fields[name].data
            assert (dtype, shape, data) == (str(want.dtype), want.shape, want.tobytes())


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("context", CONTEXTS)
def test_workers_deliver_every_row_as_signal_dataset_stores_it(
    root: str, truth: tuple[sds.Dataset, Any], context: str, mode: str
) -> None:
    dataset = make(root, mode)
    loader = DataLoader(
        dataset,
        batch_size=4,
        shuffle=True,
        num_workers=2,
        collate_fn=collate,
        multiprocessing_context=context,
    )
    seen: list[int] = []
    for batch in loader:
        assert isinstance(batch["inputs"], torch.Tensor) and batch["inputs"].shape[1:] == (120,)
        rows = rows_of(batch, mode)
        check_rows(rows, truth, dataset)
        seen.extend(row["ordinal"] for row in rows)
    assert sorted(seen) == list(range(COUNT))


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("context", CONTEXTS)
def test_the_pin_step_keeps_every_row(
    root: str, truth: tuple[sds.Dataset, Any], context: str, mode: str
) -> None:
    dataset = make(root, mode)
    loader = DataLoader(
        dataset,
        batch_size=5,
        num_workers=2,
        collate_fn=collate,
        pin_memory=True,
        multiprocessing_context=context,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        batches = list(loader)
    pinning = torch.accelerator.is_available()
    if not pinning:
        # CPU-only torch: DataLoader says so and skips the pin step; rows are untouched.
        assert any("pin_memory" in str(warning.message) for warning in caught)
    for batch in batches:
        check_rows(rows_of(batch, mode), truth, dataset)
        tensors = [value for value in batch.values() if isinstance(value, torch.Tensor)]
        assert tensors and all(tensor.is_pinned() == pinning for tensor in tensors)
    assert sum(len(batch["id"]) for batch in batches) == COUNT


@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="page-locked batches need CUDA, and this torch has none"
)
def test_pinned_batches_copy_to_the_device_intact(root: str, truth: tuple[sds.Dataset, Any]) -> None:
    dataset = make(root, "ragged")
    loader = DataLoader(dataset, batch_size=5, num_workers=2, collate_fn=collate, pin_memory=True)
    for batch in loader:
        moved = {
            k: v.to("cuda", non_blocking=True) if isinstance(v, torch.Tensor) else v for k, v in batch.items()
        }
        torch.cuda.synchronize()
        back = {k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in moved.items()}
        check_rows(rows_of(back, "ragged"), truth, dataset)


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("workers", [0, 2])
def test_a_sampler_resumed_mid_epoch_yields_the_rows_of_an_uninterrupted_run(
    root: str, truth: tuple[sds.Dataset, Any], workers: int, mode: str
) -> None:
    def run_epoch(loader: Any) -> list[list[dict[str, Any]]]:
        return [rows_of(batch, mode) for batch in loader]

    def make_loader() -> tuple[ShardAwareSampler, Any]:
        dataset = make(root, mode)
        sampler = ShardAwareSampler(dataset, seed=11, run_length=4, runs_mixed=2)
        # With workers the sampler runs ahead of the batches seen: torchdata's
        # loader keeps its state as of the batch it hands out (see the README).
        loader_class = StatefulDataLoader if workers else DataLoader
        return sampler, loader_class(
            dataset, batch_size=3, sampler=sampler, num_workers=workers, collate_fn=collate
        )

    sampler, loader = make_loader()
    sampler.set_epoch(1)
    loader.dataset.set_epoch(1)
    whole = run_epoch(loader)

    sampler, loader = make_loader()
    sampler.set_epoch(1)
    loader.dataset.set_epoch(1)
    before: list[list[dict[str, Any]]] = []
    for batch in loader:
        before.append(rows_of(batch, mode))
        if len(before) == 3:
            state = loader.state_dict() if workers else sampler.state_dict()
            break
    del loader

    sampler, loader = make_loader()
    loader.dataset.set_epoch(1)
    if workers:
        loader.load_state_dict(state)
    else:
        sampler.load_state_dict(state)
    after = run_epoch(loader)

    assert len(after) == len(whole) - 3 > 0
    assert before + after == whole
    for rows in whole:
        check_rows(rows, truth, loader.dataset)
    assert sorted(row["ordinal"] for rows in whole for row in rows) == list(range(COUNT))
    assert np.unique([row["ordinal"] for rows in after for row in rows]).size == sum(map(len, after))
