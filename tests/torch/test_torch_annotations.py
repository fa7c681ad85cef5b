"""Annotations, labels and provenance through SDSTorchDataset, collate and DataLoader workers."""

from __future__ import annotations

from torch_required import torch

import multiprocessing
from typing import Any

import numpy as np
import pytest
import signal_dataset as sds
from annotation_factory import COUNT, MODULATIONS, write_annotated
from torch.utils.data import DataLoader, Subset

from sds_loader import Annotations, BatchReader, Window
from sds_loader.samplers.filled_batches import VALID_KEY, FilledBatch
from sds_loader.torch import SDSTorchDataset, collate

WINDOW = Window("time", 120)
BURSTS = Annotations("bursts", ("intervals", "freq"), positions={"intervals": "time"})


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("torch_annotations") / "captures.sds")
    write_annotated(path)
    return path


def dataset(root: str, **kwargs: object) -> SDSTorchDataset:
    return SDSTorchDataset(
        root,
        target="modulation",
        window=WINDOW,
        annotations=[BURSTS],
        extras=("ordinal", "id", "start"),
        **kwargs,  # type: ignore[arg-type]
    )


def expected(root: str, indices: list[int], starts: np.ndarray) -> dict[str, np.ndarray]:
    reader = BatchReader(
        root,
        fields=("samples",),
        targets=("modulation",),
        window=WINDOW,
        annotations=[BURSTS],
        extras=("ordinal", "id", "start"),
    )
    return reader.read(indices, starts=starts)


def check(batch: dict[str, Any], want: dict[str, np.ndarray]) -> None:
    assert isinstance(batch["inputs"], torch.Tensor)
    assert batch["inputs"].numpy().tobytes() == want["samples"].tobytes()
    assert batch["target"].tolist() == want["modulation"].tolist()
    for key in ("bursts.intervals", "bursts.freq", "bursts.offsets", "bursts.status", "ordinal", "start"):
        value = batch[key]
        assert isinstance(value, torch.Tensor), key
        assert value.numpy().dtype == want[key].dtype and value.numpy().tobytes() == want[key].tobytes(), key
    assert batch["id"] == list(want["id"])
    offsets = batch["bursts.offsets"]
    assert int(offsets[-1]) == batch["bursts.intervals"].shape[0] == batch["bursts.freq"].shape[0]


def test_a_batch_carries_annotations_labels_and_provenance(root: str) -> None:
    data = dataset(root)
    indices = [5, 0, 16, 11, 2]
    batch = collate(data.__getitems__(indices))
    assert isinstance(batch, dict)
    check(batch, expected(root, indices, data.reader.window_starts(indices)))
    assert data.reader.labels == {"modulation": tuple(sorted(MODULATIONS))}


def test_samples_of_a_batch_cut_ragged_items_by_their_offsets(root: str) -> None:
    data = dataset(root)
    indices = [16, 11, 2]
    batch = data.__getitems__(indices)
    whole = collate(batch)
    assert isinstance(whole, dict)
    offsets = whole["bursts.offsets"]
    for k, sample in enumerate(batch):
        assert (
            sample["bursts.intervals"].tolist()
            == whole["bursts.intervals"][offsets[k] : offsets[k + 1]].tolist()
        )
        assert sample["id"] == whole["id"][k]
        assert "bursts.offsets" not in sample
    assert data[16]["ordinal"].item() == 16


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
@pytest.mark.parametrize("persistent", [False, True])
def test_forked_workers_deliver_the_same_batches(root: str, persistent: bool) -> None:
    data = dataset(root)
    loader = DataLoader(
        data,
        batch_size=4,
        shuffle=False,
        num_workers=2,
        collate_fn=collate,
        multiprocessing_context="fork",
        persistent_workers=persistent,
    )
    seen: list[int] = []
    for epoch in range(2 if persistent else 1):
        for k, batch in enumerate(loader):
            indices = list(range(4 * k, min(4 * k + 4, COUNT)))
            check(batch, expected(root, indices, data.reader.window_starts(indices)))
            seen.extend(batch["ordinal"].tolist())
    assert sorted(set(seen)) == list(range(COUNT))


def test_a_subset_reads_padded_annotations_through_collate(root: str) -> None:
    data = SDSTorchDataset(
        root,
        target="modulation",
        window=WINDOW,
        annotations=[Annotations("bursts", ("intervals",), max_items=6)],
    )
    subset = Subset(data, [3, 16, 4])
    batch = next(iter(DataLoader(subset, batch_size=3, collate_fn=collate)))
    reference = sds.open(root).annotations["bursts"]
    assert batch["bursts.count"].tolist() == [
        0
        if reference[i].status.value != "success" or "intervals" not in reference[i].fields
        else len(reference[i].fields["intervals"].data)
        for i in (3, 16, 4)
    ]


@pytest.mark.parametrize("max_items", [None, 6])
def test_padding_rows_of_a_filled_batch_hold_what_the_docs_say(root: str, max_items: int | None) -> None:
    """docs/windows.md's table of what each extra holds on a padding row, row by row."""
    sets = [BURSTS] if max_items is None else [Annotations("bursts", ("intervals",), max_items=max_items)]
    data = SDSTorchDataset(
        root, target="modulation", window=WINDOW, annotations=sets, extras=("ordinal", "id", "start")
    )
    records = [6, 16, 11]  # successes with 0, 4 and 5 events (some past the window)
    filled = FilledBatch([*records, 16, 11, 16], valid=3)
    samples = data.__getitems__(filled)
    plain = data.__getitems__(list(filled))
    batch, whole = collate(samples), collate(plain)
    assert isinstance(batch, dict) and isinstance(whole, dict)
    assert batch[VALID_KEY].tolist() == [True] * 3 + [False] * 3
    assert batch["ordinal"].tolist() == [*records, -1, -1, -1]
    assert (
        batch["start"][3:].tolist() == [0] * 3 and batch["start"][:3].tolist() == whole["start"][:3].tolist()
    )
    assert batch["id"] == [f"capture-{o:04d}" for o in filled]
    assert batch["target"][3:].tolist() == [0] * 3  # a class index: the class named first
    assert batch["bursts.status"][3:].tolist() == [0] * 3
    if max_items is None:
        # Ragged items and their offsets: the copied records'.
        for key in ("bursts.offsets", "bursts.intervals", "bursts.freq"):
            assert batch[key].tolist() == whole[key].tolist(), key
        counts = [s["bursts.intervals"].shape[0] for s in samples]
        assert counts[3:] == [counts[1], counts[2], counts[1]] and counts[1] + counts[2] > 0
    else:
        assert batch["bursts.count"][3:].tolist() == [0] * 3 and batch["bursts.count"][1:3].all()
        assert not batch["bursts.intervals"][3:].any() and batch["bursts.intervals"][1:3].any()
