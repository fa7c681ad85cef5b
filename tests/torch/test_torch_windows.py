"""SDSTorchDataset with windows: random crops that are real windows of each record,
fixed by (seed, epoch, ordinal), moved by set_epoch in every worker, and
`inputs_length` beside padded inputs."""

from __future__ import annotations

from torch_required import torch

import os

import numpy as np
import pytest
import signal_dataset as sds
from sds_factory import write_dataset
from torch.utils.data import DataLoader

from sds_loader import Window
from sds_loader.torch import SDSTorchDataset, collate

RECORDS = 12
WINDOW = 16


def capture(ordinal: int) -> sds.Record:
    n = 10 + 7 * ordinal  # 10 .. 87: some shorter than the window
    rng = np.random.default_rng(ordinal)
    data = (rng.standard_normal((2, n)) + 1j * rng.standard_normal((2, n))).astype(np.complex64)
    axes = (sds.Axis("channel", 2), sds.Axis("time", n))
    return sds.Record(
        id=f"c{ordinal}", fields={"samples": sds.Field(data, axes=axes)}, metadata={"label": ordinal}
    )


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("torch-windows")
    write_dataset(path, RECORDS, capture, records_per_shard=5)
    return os.fspath(path)


def epochs(dataset: SDSTorchDataset, count: int, **loader) -> list[list[dict[str, torch.Tensor]]]:
    batches = DataLoader(dataset, batch_size=4, shuffle=False, collate_fn=collate, **loader)
    out = []
    for epoch in range(count):
        dataset.set_epoch(epoch)
        out.append([{k: v.clone() for k, v in batch.items()} for batch in batches])
    return out


def start_of(record: np.ndarray, row: np.ndarray, valid: int) -> int:
    """Where in the record the row's valid part was cut from (its only possible start)."""
    matches = [
        s
        for s in range(record.shape[1] - valid + 1)
        if record[:, s : s + valid].tobytes() == row[:, :valid].tobytes()
    ]
    assert len(matches) == 1, matches
    return matches[0]


def test_random_crops_are_windows_and_follow_the_epoch(root):
    dataset = SDSTorchDataset(root, window=Window("time", WINDOW, pad=True, crop="random"), seed=7)
    assert dataset.keys == ("inputs", "target", "inputs_length")
    reference = sds.open(root)
    seen = []
    for batches in epochs(dataset, 2):
        starts = []
        for batch in batches:
            assert batch["inputs"].shape[1:] == (2, WINDOW)
            for row, ordinal in enumerate(batch["target"].tolist()):
                record = reference[ordinal]["samples"].data
                got = batch["inputs"][row].numpy()
                valid = int(batch["inputs_length"][row])
                assert valid == min(WINDOW, record.shape[1])
                start = start_of(record, got, valid)
                assert start + valid <= record.shape[1]
                assert not got[:, valid:].any()
                starts.append(start)
        seen.append(starts)
    assert seen[0] != seen[1]
    assert seen[0][0] == 0  # record 0 is shorter than the window


def test_same_seed_and_epoch_in_persistent_workers(root):
    def windows(**loader):
        dataset = SDSTorchDataset(root, window=Window("time", WINDOW, pad=True, crop="random"), seed=3)
        return [[b["inputs"] for b in batches] for batches in epochs(dataset, 3, **loader)]

    alone = windows()
    workers = windows(num_workers=2, persistent_workers=True, multiprocessing_context="fork")
    for epoch in range(3):
        for one, two in zip(alone[epoch], workers[epoch], strict=True):
            assert torch.equal(one, two), epoch
    assert not all(torch.equal(a, b) for a, b in zip(alone[0], alone[1], strict=True))
    other_seed = SDSTorchDataset(root, window=Window("time", WINDOW, pad=True, crop="random"), seed=4)
    assert not all(
        torch.equal(a, b["inputs"]) for a, b in zip(alone[0], epochs(other_seed, 1)[0], strict=True)
    )


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_started_process_sees_later_epochs(method):
    """What persistent workers rely on: the epoch is shared, not copied, when a
    process starts, while any other pickle carries the value alone."""
    import pickle

    from epoch_worker import report_epochs

    from sds_loader.torch.shared_epoch import SharedEpoch

    context = torch.multiprocessing.get_context(method)
    epoch = SharedEpoch(2)
    requests, replies = context.Queue(), context.Queue()
    worker = context.Process(target=report_epochs, args=(epoch, requests, replies))
    worker.start()
    try:
        seen = []
        for value in (2, 5, 9):
            epoch.value = value
            requests.put("epoch?")
            seen.append(replies.get(timeout=60))
        assert seen == [2, 5, 9]
    finally:
        requests.put(None)
        worker.join(timeout=60)
    copy = pickle.loads(pickle.dumps(epoch))
    copy.value = 11
    assert (copy.value, epoch.value) == (11, 9)


def test_center_crop_without_padding_has_no_lengths(tmp_path):
    write_dataset(tmp_path, 4, lambda i: capture(i + 2))  # lengths 24 .. 45
    dataset = SDSTorchDataset(tmp_path, window=Window("time", 8, crop="center"), target=None)
    assert dataset.keys == ("inputs",)
    item = dataset[1]
    record = sds.open(os.fspath(tmp_path))[1]["samples"].data  # 31 positions: start 11
    assert set(item) == {"inputs"}
    assert item["inputs"].numpy().tobytes() == record[:, 11:19].tobytes()


def test_arguments(root):
    with pytest.raises(TypeError, match="window must be a sds_loader.Window"):
        SDSTorchDataset(root, window="time")
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        SDSTorchDataset(root, seed=-1)
    dataset = SDSTorchDataset(root)
    with pytest.raises(ValueError, match="epoch must be a non-negative integer"):
        dataset.set_epoch(-2)
