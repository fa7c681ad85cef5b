"""Published views (reference datasets) are read natively, and read what signal_dataset reads.

A view published with `DatasetView.publish` stores no shards: its manifests
name records of the source dataset's shards by index, and signal_dataset
publishes the source's annotation sets again under the view's ordinals. Each
view here (a filtered subset, a shuffled one with a repeat over several
manifest pages, a stretch across a shard boundary, one record, none) is read
by the native core alone (``stats.fallback_records == 0``) and compared byte
for byte with ``signal_dataset.open(view)``: records, metadata, targets,
labels, windows, annotation rows and extras.
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
from torch.utils.data import DataLoader, get_worker_info

from sds_loader import Annotations, BatchReader, Window
from sds_loader.dataset import native_unavailable_reason, shard_table
from sds_loader.samplers import ShardAwareSampler
from sds_loader.torch import SDSTorchDataset, collate

#: Records 0-9, 10-19 and 20-22 are the source's three data shards.
VIEWS: dict[str, list[int]] = {
    "filtered": [i for i in range(COUNT) if i % 3 != 1],
    "shuffled": [int(i) for i in np.random.default_rng(3).permutation(COUNT)] + [4],
    "spanning": list(range(7, 14)),
    "one": [22],
}
#: Manifest pages of the shuffled view hold 4 entries each: several pages to resolve.
PAGES = {"shuffled": 4}
TARGETS = ("label", "snr_db", "flag")
STATUS = {"success": 0, "skipped": 1, "failed": 2}


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = str(tmp_path_factory.mktemp("source") / "captures.sds")
    write_annotated(root)
    return root


@pytest.fixture(scope="module")
def views(source: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("views")
    roots = {}
    for name, indices in VIEWS.items():
        roots[name] = os.fspath(folder / name)
        options = sds.PublicationOptions(shards_per_manifest=PAGES[name]) if name in PAGES else None
        sds.open(source).select(indices).publish(
            roots[name], dataset_id=name, snapshot_id="v1", publication_options=options
        )
    return roots


@pytest.fixture(params=list(VIEWS))
def view(request: pytest.FixtureRequest, views: dict[str, str]) -> tuple[str, list[int]]:
    return views[request.param], VIEWS[request.param]


def items(row: Any, name: str) -> np.ndarray | None:
    """A row's items as signal_dataset returns them, or None when a reader returns none."""
    if row.status.value != "success" or name not in row.fields:
        return None
    data: np.ndarray = row.fields[name].data
    return data


def order(count: int) -> list[int]:
    """Every ordinal, shuffled, with a repeat and a negative index."""
    shuffled = [int(i) for i in np.random.default_rng(count).permutation(count)]
    return [*shuffled, shuffled[0], -1]


def test_the_runs_are_where_signal_dataset_locates_every_ordinal(view: tuple[str, list[int]]) -> None:
    # signal_dataset has no public call that says where a view's records are;
    # this pins the private one sds_loader.dataset reads, so a change
    # in signal_dataset fails here rather than reading other records.
    root, indices = view
    opened = sds.open(root)
    assert opened.metadata.get("reference_dataset") is True
    with pytest.raises(ValueError, match="record indices"):
        opened.read_instructions(0, len(opened))
    assert native_unavailable_reason(opened) is None
    for metadata in (False, True):
        table = shard_table(opened, metadata=metadata)
        files, records = table.locate(np.arange(len(opened), dtype=np.int64))
        for ordinal in range(len(opened)):
            shard, local = opened._index.locate(ordinal)
            reference = shard.metadata if metadata else shard.data
            assert (table.paths[files[ordinal]], int(records[ordinal])) == (
                reference.path.removeprefix("file://"),
                local,
            )
    # A sorted stretch of one shard is one run, not a run per record.
    if indices == list(range(7, 14)):
        assert table.starts.tolist() == [0, 3, len(indices)]


def test_records_and_targets_are_read_natively_byte_for_byte(
    view: tuple[str, list[int]], source: str
) -> None:
    root, indices = view
    # The captures differ in length: whole records one at a time, a batch under a window.
    whole = BatchReader(root, targets=TARGETS)
    windowed = BatchReader(root, targets=TARGETS, window=Window("time", 400))
    assert whole.native_unavailable_reason is None
    asked = order(len(indices))
    batch = windowed.read(asked)
    opened, original = sds.open(root), sds.open(source)
    wanted = opened.__getitems__([i % len(indices) for i in asked])
    for row, (index, record) in enumerate(zip(asked, wanted, strict=True)):
        single = whole[index]
        assert single["samples"].tobytes() == record["samples"].data.tobytes()
        assert single["samples"].tobytes() == opened[index]["samples"].data.tobytes()
        assert batch["samples"][row].tobytes() == record["samples"].data[:400].tobytes()
        # ... which is the selected record of the source.
        assert record.id == original[indices[index]].id
        for key in TARGETS:
            assert single[key] == batch[key][row] == record.metadata[key], key
    for reader in (whole, windowed):
        assert reader.stats.fallback_records == 0
    assert whole.stats.native_records == windowed.stats.native_records == len(asked)


def test_labels_metadata_and_extras_agree_with_the_view(view: tuple[str, list[int]]) -> None:
    root, indices = view
    reader = BatchReader(
        root,
        fields=("samples",),
        targets=("modulation",),
        window=Window("time", 300, crop="random"),
        extras=("ordinal", "id", "start"),
    )
    # Classes are learnt from the view's records, not the source's.
    opened = sds.open(root)
    present = sorted({opened.record_metadata[i].metadata["modulation"] for i in range(len(opened))})
    assert reader.labels == {"modulation": tuple(present)}
    asked = order(len(indices))
    starts = reader.window_starts(asked, seed=5, epoch=2)
    batch = reader.read(asked, starts=starts)
    for row, index in enumerate(asked):
        ordinal = index % len(indices)
        record = opened[ordinal]
        start = int(starts[row])
        assert batch["samples"][row].tobytes() == record["samples"].data[start : start + 300].tobytes()
        assert present[int(batch["modulation"][row])] == record.metadata["modulation"]
        assert (int(batch["ordinal"][row]), batch["id"][row], int(batch["start"][row])) == (
            ordinal,
            record.id,
            start,
        )
    columns = reader.metadata(range(len(indices)), ["split", "snr_db", "flag", "modulation"])
    for key, column in columns.items():
        assert column.tolist() == [opened.record_metadata[i].metadata[key] for i in range(len(indices))], key
    assert reader.stats.fallback_records == 0


@pytest.mark.parametrize("max_items", [None, 6])
def test_annotation_rows_are_the_views_own_set(view: tuple[str, list[int]], max_items: int | None) -> None:
    # signal_dataset publishes the source's sets again with the view, rows
    # renumbered by view ordinal: those rows, not the source's, are what a
    # view's reader returns.
    root, indices = view
    spec = Annotations("bursts", ("intervals", "freq"), max_items=max_items, pad_value=-7)
    reader = BatchReader(
        root, fields=("samples",), window=Window("time", 200), annotations=[spec], extras=("id",)
    )
    rows = sds.open(root).annotations["bursts"]
    asked = order(len(indices))
    batch = reader.read(asked)
    offsets = batch.get("bursts.offsets")
    for k, index in enumerate(asked):
        row = rows[index % len(indices)]
        assert row.source_index == index % len(indices)
        assert batch["bursts.status"][k] == STATUS[row.status.value]
        assert batch["id"][k] == row.source_record_id
        for name in ("intervals", "freq"):
            want = items(row, name)
            count = 0 if want is None else len(want)
            if max_items is None:
                assert offsets is not None
                got = batch[f"bursts.{name}"][offsets[k] : offsets[k + 1]]
            else:
                assert batch["bursts.count"][k] == count
                got = batch[f"bursts.{name}"][k, :count]
                assert (batch[f"bursts.{name}"][k, count:] == -7).all()
            assert got.shape[0] == count
            if want is not None:
                assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (index, name)
    values = reader.annotation_values(range(len(indices)), "bursts")
    for ordinal, value in enumerate(values):
        row = rows[ordinal]
        assert value["status"] == row.status.value
        assert value["values"] == dict(row.values)
        assert value["detail_status"] == row.detail_status
    assert reader.stats.fallback_records == 0


def test_clipped_annotations_are_the_sources_rows_under_the_same_window(
    view: tuple[str, list[int]], source: str
) -> None:
    root, indices = view
    spec = Annotations("bursts", ("intervals", "freq"), positions={"intervals": "time"})
    keys = dict(fields=("samples",), targets=("label",), window=Window("time", 250), annotations=[spec])
    on_view, on_source = BatchReader(root, **keys), BatchReader(source, **keys)  # type: ignore[arg-type]
    asked = list(range(len(indices)))
    starts = on_view.window_starts(asked, seed=1)
    got = on_view.read(asked, starts=starts)
    want = on_source.read([indices[i] for i in asked], starts=starts)
    assert sorted(got) == sorted(want)
    for key in want:
        assert got[key].dtype == want[key].dtype and got[key].tobytes() == want[key].tobytes(), key


def test_an_empty_view_reads_nothing_and_says_so(source: str, tmp_path: Any) -> None:
    root = os.fspath(tmp_path / "empty")
    sds.open(source).select([]).publish(root, dataset_id="empty", snapshot_id="v1")
    reader = BatchReader(root, annotations=[Annotations("bursts", ("intervals",))])
    assert len(reader) == 0 and reader.native_unavailable_reason is None
    with pytest.raises(ValueError, match="holds no records"):
        reader.read([])


def test_a_view_of_transposed_shards_is_addressed_natively_and_served_by_signal_dataset(
    tmp_path: Any,
) -> None:
    # The view is addressed natively; its records' transposed chunks are the
    # one thing the core declines, and signal_dataset serves exactly those.
    from sds_factory import capture, write_dataset

    base = os.fspath(tmp_path / "base")
    write_dataset(base, 8, capture, records_per_shard=4, writer_options=[None, "group_size:1,transpose:true"])
    root = os.fspath(tmp_path / "view")
    picked = [6, 1, 4, 3, 7]
    sds.open(base).select(picked).publish(root, dataset_id="mixed", snapshot_id="v1")
    reader = BatchReader(root, targets=("label",))
    assert reader.native_unavailable_reason is None
    batch = reader.read(range(len(picked)))
    opened = sds.open(root)
    for row in range(len(picked)):
        assert batch["samples"][row].tobytes() == opened[row]["samples"].data.tobytes()
        assert batch["label"][row] == opened[row].metadata["label"]
    transposed = sum(1 for i in picked if i >= 4)
    assert reader.stats.fallback_records == transposed
    assert reader.stats.native_records == len(picked) - transposed


def test_shard_aware_runs_break_where_the_view_changes_shard(views: dict[str, str]) -> None:
    # The spanning view's 7 records are source records 7-9 (shard 0) and
    # 10-13 (shard 1). Runs of 4 aligned to records in the shard: [7], [8, 9]
    # and [10..13], 3 runs; cut as if stored together it would be 2.
    dataset = SDSTorchDataset(views["spanning"], target="label")
    sampler = ShardAwareSampler(dataset, seed=0, run_length=4, runs_mixed=1)
    assert sampler.runs == 3
    assert sorted(sampler) == list(range(7))


def collate_with_paths(batch: Any) -> tuple[Any, tuple[int, int]]:
    """The batch, and how many records each path has served in this worker so far."""
    info = get_worker_info()
    assert info is not None
    stats = info.dataset.reader.stats
    return collate(batch), (stats.native_records, stats.fallback_records)


@pytest.mark.parametrize(
    "context",
    [c for c in ("fork", "spawn") if c in multiprocessing.get_all_start_methods()],
)
def test_workers_read_a_view_with_its_annotations(views: dict[str, str], context: str) -> None:
    root = views["shuffled"]
    spec = Annotations("bursts", ("intervals",))
    dataset = SDSTorchDataset(
        root, target="modulation", window=Window("time", 300), annotations=[spec], extras=("ordinal", "id")
    )
    loader = DataLoader(
        dataset,
        batch_size=5,
        num_workers=2,
        collate_fn=collate_with_paths,
        multiprocessing_context=context,
    )
    opened = sds.open(root)
    rows = opened.annotations["bursts"]
    classes = dataset.reader.labels["modulation"]
    assert set(classes) <= set(MODULATIONS)
    seen: list[int] = []
    for batch, (native, fallback) in loader:
        assert fallback == 0 and native > 0
        offsets = batch["bursts.offsets"]
        for k, ordinal in enumerate(batch["ordinal"].tolist()):
            record = opened[ordinal]
            assert isinstance(batch["inputs"], torch.Tensor)
            assert batch["inputs"][k].numpy().tobytes() == record["samples"].data[:300].tobytes()
            assert classes[int(batch["target"][k])] == record.metadata["modulation"]
            assert batch["id"][k] == record.id
            want = items(rows[ordinal], "intervals")
            got = batch["bursts.intervals"][offsets[k] : offsets[k + 1]].numpy()
            assert got.tobytes() == (b"" if want is None else want.tobytes())
        seen.extend(batch["ordinal"].tolist())
    assert seen == list(range(len(opened)))


def test_a_view_in_object_storage_reads_the_sources_shards_natively(s3_dataset: tuple[str, str]) -> None:
    # The view's manifests name the source's shards by absolute s3:// URI.
    uri, _ = s3_dataset
    view = uri.rstrip("/") + "-view"
    picked = [40, 3, 17, 18, 19, 2, 47]
    sds.open(uri).select(picked).publish(view, dataset_id="s3-view", snapshot_id="v1")
    reader = BatchReader(view, targets=("label",))
    assert reader.native_unavailable_reason is None
    batch = reader.read([6, 0, 3, 2, 4])
    opened = sds.open(view)
    for row, ordinal in enumerate([6, 0, 3, 2, 4]):
        assert batch["samples"][row].tobytes() == opened[ordinal]["samples"].data.tobytes()
        assert batch["label"][row] == opened[ordinal].metadata["label"]
    assert reader.stats.fallback_records == 0 and reader.stats.native_records == 5
    assert reader.stats.fetch_requests > 0
