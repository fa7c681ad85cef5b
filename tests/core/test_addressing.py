"""The shard table is signal_dataset's own addressing, read once from the manifests.

`addressing.shard_table` reads the snapshot's manifest pages itself (fast
for signal_dataset's fixed layout, through signal_dataset's parser for
anything else). Every shard entry must land where signal_dataset's
`read_instructions` puts it: same first ordinal, same file, same record
offset, for data and for metadata shards, over datasets of several manifest
pages and views. A change in how signal_dataset writes or reads manifests
fails here, not as other records in a batch.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import signal_dataset as sds
from sds_factory import write_dataset

from sds_loader import BatchReader
from sds_loader import dataset as addressing
from sds_loader.shard_names import ShardNames


def instructions_table(dataset: sds.Dataset, *, metadata: bool) -> list[tuple[int, str, int, int]]:
    return [
        (i.first_ordinal, i.filename.removeprefix("file://"), i.skip, i.take)
        for i in dataset.read_instructions(0, len(dataset), metadata=metadata)
    ]


def table_rows(table: addressing.ShardTable) -> list[tuple[int, str, int, int]]:
    starts = table.starts.tolist()
    return [
        (starts[k], table.paths[int(table.files[k])], int(table.skips[k]), starts[k + 1] - starts[k])
        for k in range(len(starts) - 1)
    ]


@pytest.fixture(scope="module")
def paged(tmp_path_factory: pytest.TempPathFactory) -> str:
    """57 records in shards of 4 (the last shorter), 3 shards to a manifest page."""
    root = tmp_path_factory.mktemp("paged") / "ds"
    write_dataset(root, 57, records_per_shard=4, shards_per_manifest=3)
    return str(root)


@pytest.mark.parametrize("metadata", [False, True])
def test_every_shard_is_where_read_instructions_puts_it(paged: str, metadata: bool) -> None:
    dataset = sds.open(paged)
    table = addressing.shard_table(dataset, metadata=metadata)
    assert isinstance(table.paths, ShardNames) and table.paths.compact
    assert table_rows(table) == instructions_table(dataset, metadata=metadata)
    # Every declared size is the file's, and the table's root is the dataset's.
    assert table.sizes is not None
    assert [Path(table.paths[k]).stat().st_size for k in range(len(table.paths))] == table.sizes.tolist()
    assert table.root == paged


def test_every_ordinal_locates_as_signal_dataset_locates_it(paged: str) -> None:
    dataset = sds.open(paged)
    table = addressing.shard_table(dataset)
    ordinals = np.arange(len(dataset))
    files, records = table.locate(ordinals)
    for ordinal in ordinals.tolist():
        shard, local = dataset._index.locate(ordinal)
        assert table.paths[int(files[ordinal])] == f"{paged}/{shard.data.path}"
        assert int(records[ordinal]) == local


def test_a_view_is_tabulated_from_its_entries(paged: str, tmp_path: Path) -> None:
    view = str(tmp_path / "view")
    picked = [40, 3, 4, 5, 17, 56, 0]
    sds.open(paged).select(picked).publish(view, dataset_id="view", snapshot_id="v1")
    opened = sds.open(view)
    table = addressing.shard_table(opened)
    assert not table.paths.compact  # absolute paths into the source: signal_dataset's parser
    files, records = table.locate(np.arange(len(picked)))
    for ordinal in range(len(picked)):
        shard, local = opened._index.locate(ordinal)
        assert table.paths[int(files[ordinal])] == shard.data.path
        assert int(records[ordinal]) == local


def rewrite_page(root: Path, edit) -> None:  # type: ignore[no-untyped-def]
    """Edit the first manifest page, keeping its size (the snapshot records it) by padding."""
    page = next(root.glob("manifests/*/*.json"))
    size = page.stat().st_size
    value = json.loads(page.read_text())
    edit(value)
    text = json.dumps(value, separators=(",", ":"))
    assert len(text) <= size
    page.write_text(text + " " * (size - len(text)))


def test_a_page_outside_the_fixed_layout_goes_to_signal_datasets_parser(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    write_dataset(root, 8, records_per_shard=4)
    rewrite_page(root, lambda value: value["shards"][1].update(note="written by hand"))
    dataset = sds.open(str(root))
    table = addressing.shard_table(dataset)
    assert not table.paths.compact
    assert table_rows(table) == instructions_table(dataset, metadata=False)


@pytest.mark.parametrize(
    "edit",
    [
        lambda value: value["shards"][0]["data"].update(stored_bytes=-1),
        lambda value: value["shards"][0]["data"].update(path="objects/data/../../elsewhere.arrayrecord"),
        lambda value: value["shards"][0].update(record_count=True),
        lambda value: value.update(record_count=9),
    ],
    ids=["negative size", "path out of the root", "a bool for a count", "a page of another length"],
)
def test_a_page_signal_dataset_refuses_is_refused(tmp_path: Path, edit) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "ds"
    write_dataset(root, 8, records_per_shard=4)
    rewrite_page(root, edit)
    dataset = sds.open(str(root))
    with pytest.raises((sds.CorruptDatasetError, ValueError, TypeError)):
        dataset.read_instructions(0, len(dataset))
    with pytest.raises((sds.CorruptDatasetError, ValueError, TypeError)):
        addressing.shard_table(dataset)


def test_a_pickled_reader_takes_its_table_along(paged: str, monkeypatch: pytest.MonkeyPatch) -> None:
    reader = BatchReader(paged, fields=("samples",))
    state = pickle.dumps(reader)
    with addressing._TABLES_LOCK:
        addressing._TABLES.clear()
    copy = pickle.loads(state)
    with addressing._TABLES_LOCK:
        assert addressing.identity(sds.open(paged)) in addressing._TABLES

    def no_manifest_read(*args: object, **kwargs: object) -> None:
        raise AssertionError("the unpickled reader read the manifests again")

    monkeypatch.setattr(addressing, "_build", no_manifest_read)
    batch = copy.read([56, 0, 13])
    expected = sds.open(paged)
    assert [row.tobytes() for row in batch["samples"]] == [
        expected[i]["samples"].data.tobytes() for i in (56, 0, 13)
    ]


def test_a_table_is_used_only_for_the_snapshot_it_describes(paged: str, tmp_path: Path) -> None:
    other = tmp_path / "other"
    write_dataset(other, 12, records_per_shard=4)
    mine = addressing.identity(sds.open(paged))
    assert mine == addressing.identity(sds.open(paged))
    assert mine != addressing.identity(sds.open(str(other)))
    assert mine != addressing.identity(sds.open(paged), metadata=True)
