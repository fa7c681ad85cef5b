"""SDSTorchDataset against the adapter from signal_dataset's PyTorch guide.

Every DataLoader test draws its expected batches from `ReferenceDataset`, the
guide's adapter copied verbatim, through a plain DataLoader (default collate,
no workers) with the same sampler seed, and requires equal batches: same keys,
dtypes, shapes and values.
"""

from __future__ import annotations

from torch_required import torch

import gc
import os
import pickle
import re
import subprocess
import sys

import numpy as np
import pytest
import signal_dataset as sds
from sds_factory import field, write_dataset
from torch.utils.data import DataLoader, Dataset, default_collate, get_worker_info

from sds_loader import TargetError
from sds_loader.torch import Batch, SDSTorchDataset, collate

RECORDS = 40
CLASSES = 4


# -- the reference: the guide's adapter, as published -------------------------


class ReferenceDataset(Dataset[dict[str, torch.Tensor]]):
    def __init__(self, uri: str) -> None:
        self._uri = uri
        self._dataset = None
        self._pid = None

    def _open(self) -> sds.Dataset:
        pid = os.getpid()
        if self._dataset is None or self._pid != pid:
            self._dataset = sds.open(self._uri)
            self._pid = pid
        return self._dataset

    def __len__(self) -> int:
        return len(self._open())

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        record = self._open()[index]
        return {
            "inputs": torch.from_numpy(record["samples"].data.copy()),
            "target": torch.tensor(record.metadata["label"], dtype=torch.long),
        }

    def __getstate__(self) -> dict[str, object]:
        return {"_uri": self._uri}

    def __setstate__(self, state: dict[str, object]) -> None:
        self._uri = str(state["_uri"])
        self._dataset = None
        self._pid = None


# -- fixtures -----------------------------------------------------------------


def make_record(ordinal: int) -> sds.Record:
    rng = np.random.default_rng(1000 + ordinal)
    samples = (rng.standard_normal((2, 64)) + 1j * rng.standard_normal((2, 64))).astype(np.complex64)
    other = rng.standard_normal(3).astype(np.float32)
    return sds.Record(
        id=f"capture-{ordinal:04d}",
        fields={"samples": field(samples), "other": field(other, "b")},
        metadata={
            "label": ordinal % CLASSES,
            "snr_db": float(rng.uniform(-5, 20)),
            "index": ordinal,
        },
    )


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("torch-dataset") / "captures"
    write_dataset(path, RECORDS, make_record, records_per_shard=16)
    return str(path)


def assert_same_batch(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert type(got) is dict
    assert list(got) == list(expected)
    for key, tensor in expected.items():
        assert isinstance(got[key], torch.Tensor), key
        assert got[key].dtype == tensor.dtype, (key, got[key].dtype, tensor.dtype)
        assert got[key].shape == tensor.shape, (key, got[key].shape, tensor.shape)
        assert torch.equal(got[key], tensor), key


def reference_batches(root: str, *, batch_size: int, seed: int | None, epochs: int = 1):
    """The guide adapter's batches through a plain DataLoader, per epoch."""
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    loader = DataLoader(
        ReferenceDataset(root),
        batch_size=batch_size,
        shuffle=seed is not None,
        generator=generator,
    )
    return [list(loader) for _ in range(epochs)]


# -- the dataset on its own -----------------------------------------------------


def test_items_equal_reference(root: str) -> None:
    ours, reference = SDSTorchDataset(root), ReferenceDataset(root)
    assert len(ours) == len(reference) == RECORDS
    for index in (0, 1, 15, 16, 17, RECORDS - 1, -1, -RECORDS):
        assert_same_batch(ours[index], reference[index])


def test_item_tensors_are_writable_and_independent(root: str) -> None:
    dataset = SDSTorchDataset(root)
    first, again = dataset[3], dataset[3]
    first["inputs"].zero_()
    first["target"].fill_(99)
    assert_same_batch(again, ReferenceDataset(root)[3])
    assert_same_batch(dataset[3], ReferenceDataset(root)[3])


def test_getitems_is_one_read_of_the_whole_batch(root: str) -> None:
    dataset = SDSTorchDataset(root)
    indices = [5, 39, 0, 17, 5, 16]
    before = dataset.reader.stats.batches
    batch = dataset.__getitems__(indices)
    assert dataset.reader.stats.batches == before + 1
    assert isinstance(batch, Batch) and len(batch) == len(indices)
    stacked = batch.tensors
    assert stacked["inputs"].shape == (len(indices), 2, 64)
    assert stacked["inputs"].dtype == torch.complex64
    assert stacked["target"].tolist() == [i % CLASSES for i in indices]
    reference = ReferenceDataset(root)
    for row, index in enumerate(indices):
        assert_same_batch(batch[row], reference[index])
    assert_same_batch(batch[-1], reference[indices[-1]])
    assert [s["target"].item() for s in batch[1:3]] == [39 % CLASSES, 0]
    with pytest.raises(IndexError):
        batch[len(indices)]


def test_getitems_takes_index_arrays_and_tensors(root: str) -> None:
    dataset = SDSTorchDataset(root)
    expected = collate(dataset.__getitems__([7, 3, 3]))
    for indices in (np.array([7, 3, 3]), torch.tensor([7, 3, 3]), (7, 3, -37)):
        batch = dataset.__getitems__(indices)
        assert len(batch) == 3
        assert_same_batch(collate(batch), expected)


def test_batch_pickles_and_checks_its_rows(root: str) -> None:
    batch = SDSTorchDataset(root).__getitems__([0, 5])
    assert repr(batch) == "Batch(size=2, inputs=complex64[2, 2, 64], target=int64[2])"
    copy = pickle.loads(pickle.dumps(batch))
    assert_same_batch(collate(copy), collate(batch))
    with pytest.raises(ValueError, match="needs 3 rows"):
        Batch({"inputs": torch.zeros(2, 4)}, 3)


def test_grain_batched_read_is_the_same_method(root: str) -> None:
    dataset = SDSTorchDataset(root)
    assert SDSTorchDataset._getitems is SDSTorchDataset.__getitems__
    via_grain = dataset._getitems([4, 2])
    assert_same_batch(collate(via_grain), collate(dataset.__getitems__([4, 2])))


def test_default_collate_and_collate_agree_on_a_batch(root: str) -> None:
    dataset, reference = SDSTorchDataset(root), ReferenceDataset(root)
    indices = [9, 3, 30, 3]
    batch = dataset.__getitems__(indices)
    expected = default_collate([reference[i] for i in indices])
    assert_same_batch(default_collate(batch), expected)
    assert_same_batch(collate(batch), expected)


def test_collate_passes_the_batch_through_without_copying(root: str) -> None:
    batch = SDSTorchDataset(root).__getitems__([1, 2, 3])
    inner = batch.tensors
    out = collate(batch)
    for key, tensor in inner.items():
        assert out[key] is tensor
    # default_collate stacks into new memory; collate does not.
    assert default_collate(batch)["inputs"].data_ptr() != inner["inputs"].data_ptr()


def test_collate_falls_back_to_default_collate_for_sample_lists(root: str) -> None:
    reference = ReferenceDataset(root)
    samples = [reference[i] for i in (0, 7)]
    assert_same_batch(collate(samples), default_collate(samples))


def test_more_fields_and_targets_map_to_more_keys(root: str) -> None:
    dataset = SDSTorchDataset(root, fields={"aux": "other"}, targets={"snr": "snr_db", "index": "index"})
    assert dataset.keys == ("inputs", "aux", "target", "snr", "index")
    reference = sds.open(root)
    batch = collate(dataset.__getitems__([12, 2]))
    assert list(batch) == ["inputs", "aux", "target", "snr", "index"]
    for row, index in enumerate([12, 2]):
        record = reference[index]
        assert batch["aux"][row].numpy().tobytes() == record["other"].data.tobytes()
        assert batch["snr"][row].item() == record.metadata["snr_db"]
        assert batch["index"][row].item() == index
    assert batch["aux"].dtype == torch.float32
    assert batch["snr"].dtype == torch.float64
    assert batch["index"].dtype == torch.int64


def test_mapping_replaces_and_drops_default_keys(root: str) -> None:
    replaced = SDSTorchDataset(root, fields={"inputs": "other", "iq": "samples"}, target=None)
    assert replaced.keys == ("inputs", "iq")
    sample = replaced[6]
    assert sample["inputs"].dtype == torch.float32 and sample["inputs"].shape == (3,)
    assert torch.equal(sample["iq"], ReferenceDataset(root)[6]["inputs"])
    only_targets = SDSTorchDataset(root, inputs=None, targets={"snr": "snr_db"})
    assert only_targets.keys == ("target", "snr")
    assert only_targets[1]["target"].item() == 1


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"fields": {"iq": "samples"}}, ValueError, "mapped to both 'inputs' and 'iq'"),
        ({"targets": {"inputs": "snr_db"}}, ValueError, "names both a field and a target"),
        ({"fields": {"label": "label"}}, ValueError, "both as a field and as a metadata target"),
        ({"inputs": None, "target": None}, ValueError, "at least one"),
        ({"fields": ["samples"]}, TypeError, "map output keys"),
        ({"fields": {"x": ""}}, TypeError, "non-empty"),
        ({"inputs": 3}, TypeError, "inputs="),
        ({"threads": 0}, ValueError, "threads"),
        ({"inputs": "nope"}, ValueError, "no field 'nope'"),
        ({"target": "nope"}, TargetError, "no metadata key 'nope'"),
    ],
)
def test_bad_arguments_say_what_to_do(root: str, kwargs: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        SDSTorchDataset(root, **kwargs)


def test_pickling_drops_the_reader_and_repr_is_stable(root: str) -> None:
    dataset = SDSTorchDataset(root, targets={"snr": "snr_db"}, threads=2)
    dataset[0]
    text = repr(dataset)
    assert not re.search(r"0x[0-9a-fA-F]{6,}", text)
    assert text == (
        f"SDSTorchDataset({root!r}, fields={{'inputs': 'samples'}}, "
        "targets={'target': 'label', 'snr': 'snr_db'}, threads=2)"
    )
    payload = pickle.dumps(dataset)
    # Small: the settings, and the shard tables (a few dozen bytes a shard),
    # which spare a spawned worker a read of every manifest page.
    state = dataset.__getstate__()
    tables = state.pop("_tables")
    assert len(pickle.dumps(state)) < 1000
    shards = sum(len(table.paths) for table in tables.values())
    assert 0 < shards and len(pickle.dumps(tables)) < 1000 + 100 * shards
    copy = pickle.loads(payload)
    assert copy._local is None
    assert repr(copy) == text
    assert_same_batch(copy[5], dataset[5])
    # And in a fresh interpreter.
    script = "import pickle, sys; print(repr(pickle.loads(sys.stdin.buffer.read())))"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    result = subprocess.run(
        [sys.executable, "-c", script], input=payload, capture_output=True, check=True, env=env
    )
    assert result.stdout.decode().strip() == text


def test_reader_is_reopened_when_the_pid_changes(root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    dataset = SDSTorchDataset(root)
    before = dataset.reader
    assert dataset.reader is before
    real_pid = os.getpid()
    # multiprocessing's shared heap (behind the dataset's epoch) refuses to free
    # under another pid what it allocated under this one: let earlier tests'
    # garbage go now, not while the pid is faked.
    gc.collect()
    with monkeypatch.context() as faked:
        faked.setattr(os, "getpid", lambda: real_pid + 100_000)
        after = dataset.reader
        assert after is not before
        got = dataset[8]
    assert_same_batch(got, ReferenceDataset(root)[8])


def test_threads_default_in_main_process(root: str) -> None:
    assert SDSTorchDataset(root).reader.threads >= 1
    assert SDSTorchDataset(root, threads=3).reader.threads == 3


# -- through a DataLoader -------------------------------------------------------


def report_worker(batch: object) -> dict[str, object]:
    """collate_fn that also reports what the worker's copy of the dataset did."""
    info = get_worker_info()
    out = collate(batch)
    assert info is not None
    out["worker_threads"] = torch.tensor(info.dataset.reader.threads)
    out["worker_in_ring"] = torch.tensor(batch._ring_block is not None)
    out["worker_pid"] = torch.tensor(os.getpid())
    out["worker_repr"] = repr(info.dataset)
    out["worker_buffers"] = info.dataset.buffers
    return out


def strip_report(batch: dict[str, object]) -> dict[str, torch.Tensor]:
    return {key: value for key, value in batch.items() if not key.startswith("worker_")}


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("bypass", [False, True], ids=["default_collate", "collate"])
@pytest.mark.parametrize("seed", [None, 7], ids=["sequential", "shuffled"])
def test_loader_matches_reference_batch_for_batch(
    root: str, num_workers: int, bypass: bool, seed: int | None
) -> None:
    (expected,) = reference_batches(root, batch_size=6, seed=seed)
    dataset = SDSTorchDataset(root)
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    loader = DataLoader(
        dataset,
        batch_size=6,
        shuffle=seed is not None,
        generator=generator,
        num_workers=num_workers,
        collate_fn=collate if bypass else None,
        multiprocessing_context="fork" if num_workers else None,
    )
    got = list(loader)
    assert len(got) == len(expected) == 7
    for ours, theirs in zip(got, expected, strict=True):
        assert_same_batch(ours, theirs)


@pytest.mark.parametrize("bypass", [False, True], ids=["default_collate", "collate"])
def test_spawn_workers_match_reference(root: str, bypass: bool) -> None:
    (expected,) = reference_batches(root, batch_size=8, seed=3)
    loader = DataLoader(
        SDSTorchDataset(root),
        batch_size=8,
        shuffle=True,
        generator=torch.Generator().manual_seed(3),
        num_workers=2,
        collate_fn=collate if bypass else None,
        multiprocessing_context="spawn",
    )
    got = list(loader)
    assert len(got) == len(expected)
    for ours, theirs in zip(got, expected, strict=True):
        assert_same_batch(ours, theirs)


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_workers_use_one_thread_and_shared_memory(root: str, context: str) -> None:
    dataset = SDSTorchDataset(root)
    main_repr = repr(dataset)
    loader = DataLoader(
        dataset,
        batch_size=10,
        num_workers=2,
        collate_fn=report_worker,
        multiprocessing_context=context,
    )
    batches = list(loader)
    assert len(batches) == 4
    for batch in batches:
        assert batch["worker_threads"].item() == 1
        assert batch["worker_buffers"] == "ring"
        assert batch["worker_pid"].item() != os.getpid()
        assert batch["worker_repr"] == main_repr
        if not batch["worker_in_ring"].item():
            # Arrived by handle: still in shared memory on this side.
            assert batch["inputs"].is_shared() and batch["target"].is_shared()
    assert len({b["worker_pid"].item() for b in batches}) == 2
    # Each worker's first batch sizes its ring of blocks; the next goes into one.
    assert sorted(b["worker_in_ring"].item() for b in batches) == [False, False, True, True]
    expected = list(DataLoader(ReferenceDataset(root), batch_size=10))
    for ours, theirs in zip(batches, expected, strict=True):
        assert_same_batch(strip_report(ours), theirs)


def report_mappings(batch: object) -> dict[str, object]:
    """collate_fn that also reports whether the worker's reads copy out of shard mappings."""
    from sds_loader import _native

    out = collate(batch)
    out["worker_mapped"] = torch.tensor(_native.mapped_reads_guarded())
    return out


def test_forked_workers_copy_out_of_mappings_after_the_main_process_read(root: str) -> None:
    # The main process reads first (a validation pass, a peek at a batch):
    # its SIGBUS guard is installed when the workers are forked, and each
    # worker installs torch's own handler before its first batch. The
    # worker's reads must still copy out of its mappings, not fall back to
    # pread (a quarter more CPU a batch of short records).
    dataset = SDSTorchDataset(root)
    dataset.reader.read([0, 1, 2])
    loader = DataLoader(
        dataset,
        batch_size=10,
        num_workers=2,
        collate_fn=report_mappings,
        multiprocessing_context="fork",
    )
    batches = list(loader)
    assert [bool(b["worker_mapped"].item()) for b in batches] == [True] * 4
    expected = list(DataLoader(ReferenceDataset(root), batch_size=10))
    for ours, theirs in zip(batches, expected, strict=True):
        assert_same_batch(strip_report(ours), theirs)


def test_explicit_threads_are_kept_in_workers(root: str) -> None:
    loader = DataLoader(
        SDSTorchDataset(root, threads=2),
        batch_size=20,
        num_workers=2,
        collate_fn=report_worker,
        multiprocessing_context="fork",
    )
    assert [b["worker_threads"].item() for b in loader] == [2, 2]


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_persistent_workers_serve_every_epoch(root: str, context: str) -> None:
    dataset = SDSTorchDataset(root, targets={"index": "index"})
    loader = DataLoader(
        dataset,
        batch_size=8,
        shuffle=True,
        generator=torch.Generator().manual_seed(11),
        num_workers=2,
        persistent_workers=True,
        collate_fn=report_worker,
        multiprocessing_context=context,
    )
    reference = ReferenceDataset(root)
    orders, pids = [], set()
    for _epoch in range(3):
        order = []
        for batch in loader:
            pids.add(batch["worker_pid"].item())
            indices = batch["index"].tolist()
            expected = default_collate([reference[i] for i in indices])
            assert_same_batch({k: batch[k] for k in ("inputs", "target")}, expected)
            order.extend(indices)
        assert sorted(order) == list(range(RECORDS))
        orders.append(order)
    assert len(pids) == 2  # the same two workers served all three epochs
    assert len({tuple(order) for order in orders}) == 3


def test_collate_behind_subset_and_concat(root: str) -> None:
    from torch.utils.data import ConcatDataset, Subset

    reference = ReferenceDataset(root)
    subset = Subset(SDSTorchDataset(root), [30, 2, 17, 5, 9])
    concat = ConcatDataset([SDSTorchDataset(root), SDSTorchDataset(root)])
    for dataset, indices in ((subset, [30, 2, 17, 5, 9]), (concat, list(range(35, 40)) + list(range(5)))):
        expected = list(DataLoader(Subset(reference, indices), batch_size=4))
        got = list(
            DataLoader(
                dataset,
                batch_size=4,
                collate_fn=collate,
                sampler=range(35, 45) if dataset is concat else None,
            )
        )
        assert len(got) == len(expected)
        for ours, theirs in zip(got, expected, strict=True):
            assert_same_batch(ours, theirs)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_shards_served_by_the_fallback_match_too(tmp_path, num_workers: int) -> None:
    # The middle shard's transposed chunks go through signal_dataset's reader.
    root = str(tmp_path / "mixed")
    write_dataset(root, 30, make_record, records_per_shard=10, writer_options=[None, "transpose:true", None])
    (expected,) = reference_batches(root, batch_size=7, seed=2)
    dataset = SDSTorchDataset(root)
    loader = DataLoader(
        dataset,
        batch_size=7,
        shuffle=True,
        generator=torch.Generator().manual_seed(2),
        num_workers=num_workers,
        collate_fn=collate,
        multiprocessing_context="fork" if num_workers else None,
    )
    got = list(loader)
    for ours, theirs in zip(got, expected, strict=True):
        assert_same_batch(ours, theirs)
    if num_workers == 0:
        stats = dataset.reader.stats
        assert stats.fallback_records == 10
        assert stats.native_records == 20 and stats.batches == 5


def test_main_process_loader_reads_each_batch_once(root: str) -> None:
    dataset = SDSTorchDataset(root)
    before = dataset.reader.stats.batches
    batches = list(DataLoader(dataset, batch_size=16, collate_fn=collate))
    assert [len(b["target"]) for b in batches] == [16, 16, 8]
    assert dataset.reader.stats.batches == before + 3


def test_corrupt_record_in_a_worker_reaches_the_main_process(tmp_path) -> None:
    """A damaged record read in a DataLoader worker raises there; the error
    the training loop sees is still a CorruptShardError naming shard and ordinal."""
    from sds_factory import data_shards, record_chunks

    from sds_loader import CorruptShardError

    root = os.fspath(tmp_path / "dataset")
    write_dataset(root, 12, make_record)
    (shard,) = data_shards(root)
    chunk = record_chunks(shard)[9]
    with open(shard, "r+b") as file:
        position = chunk.physical(40 + chunk.data_size - 3)
        file.seek(position)
        byte = file.read(1)[0]
        file.seek(position)
        file.write(bytes([byte ^ 0x10]))
    loader = DataLoader(
        SDSTorchDataset(root), batch_size=4, num_workers=2, collate_fn=collate, multiprocessing_context="fork"
    )
    with pytest.raises(CorruptShardError) as raised:
        list(loader)
    message = str(raised.value)
    assert os.path.basename(shard) in message and re.search(r"\brecord 9\b", message), message
