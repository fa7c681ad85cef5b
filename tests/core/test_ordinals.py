"""A batch's ordinals are checked and located natively, as numpy would have.

`indices.normalize` sends a plain 1-D int64 array, or a list or tuple of
plain ints, straight to one native pass, and everything else through its
type checks first; every way in must give the same ordinals and the same
errors. `ShardTable.locate` searches the table's runs
natively; it must agree with numpy's search over real tables (one run per
shard, and a view's, where one file holds several runs) and refuse an
ordinal outside the table instead of reading past it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import signal_dataset as sds
from native_batches import native_read, open_native
from native_required import _native
from sds_factory import write_dataset

from sds_loader import dataset as addressing
from sds_loader import indices

LENGTH = 37


def python_path(batch: np.ndarray, length: int) -> np.ndarray:
    """The same batch through normalize's type checks first (an int32 array is not passed straight on)."""
    return indices.normalize(batch.astype(np.int32), length)


def numpy_locate(table: addressing.ShardTable, ordinals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    run = np.searchsorted(table.starts, ordinals, side="right") - 1
    return table.files[run], table.skips[run] + (ordinals - table.starts[run])


@pytest.mark.parametrize("seed", range(5))
def test_int64_batches_normalize_as_other_integer_arrays_do(seed: int) -> None:
    batch = np.random.default_rng(seed).integers(-LENGTH, LENGTH, size=64, dtype=np.int64)
    native = indices.normalize(batch, LENGTH)
    assert native.dtype == np.int64
    assert native.tolist() == python_path(batch, LENGTH).tolist()
    assert native.tolist() == [i + LENGTH if i < 0 else i for i in batch.tolist()]


@pytest.mark.parametrize("kind", [list, tuple])
def test_lists_and_tuples_of_ints_normalize_as_arrays_do(kind: type) -> None:
    batch = np.random.default_rng(7).integers(-LENGTH, LENGTH, size=300, dtype=np.int64)
    assert indices.normalize(kind(batch.tolist()), LENGTH).tolist() == python_path(batch, LENGTH).tolist()


@pytest.mark.parametrize(
    ("batch", "error", "message"),
    [
        ([1, True], TypeError, "got bool True"),
        ([1, 2.0], TypeError, "got float 2.0"),
        ((0, 2**64), IndexError, f"index {2**64} is out of range"),
        ([0, -(2**63) - 1], IndexError, f"index {-(2**63) - 1} is out of range"),
        ([0, LENGTH], IndexError, f"index {LENGTH} is out of range"),
    ],
)
def test_a_list_that_is_not_all_int64s_is_refused_by_name(batch: list, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        indices.normalize(batch, LENGTH)


def test_integers_of_other_types_in_a_list_are_still_accepted() -> None:
    assert indices.normalize([np.int16(-1), np.uint64(3), 2], LENGTH).tolist() == [LENGTH - 1, 3, 2]


def test_the_callers_array_is_copied_not_wrapped_in_place() -> None:
    batch = np.asarray([-1, 0, -LENGTH], dtype=np.int64)
    ordinals = indices.normalize(batch, LENGTH)
    assert ordinals.tolist() == [LENGTH - 1, 0, 0]
    assert batch.tolist() == [-1, 0, -LENGTH]
    assert not np.shares_memory(ordinals, batch)


def test_a_strided_int64_batch_is_read_by_its_strides() -> None:
    batch = np.arange(-LENGTH, LENGTH, dtype=np.int64)[::5]
    assert indices.normalize(batch, LENGTH).tolist() == python_path(batch, LENGTH).tolist()


@pytest.mark.parametrize("bad", [LENGTH, -LENGTH - 1, 2**62, -(2**63), 2**63 - 1])
def test_an_index_out_of_range_fails_naming_it_on_every_way_in(bad: int) -> None:
    batch = np.asarray([0, 5, bad, LENGTH + 10], dtype=np.int64)
    message = (
        f"index {bad} is out of range for a dataset of {LENGTH} records (valid: {-LENGTH} to {LENGTH - 1})"
    )
    ways_in = [batch, batch.tolist(), tuple(batch.tolist()), [np.int64(i) for i in batch.tolist()]]
    if -(2**31) <= bad < 2**31:
        ways_in.append(batch.astype(np.int32))
    for indices_given in ways_in:
        with pytest.raises(IndexError) as raised:
            indices.normalize(indices_given, LENGTH)
        assert str(raised.value) == message


def test_an_empty_dataset_refuses_every_index_and_accepts_an_empty_batch() -> None:
    assert indices.normalize(np.zeros(0, dtype=np.int64), 0).size == 0
    with pytest.raises(IndexError, match="index 0 is out of range for a dataset of 0 records"):
        indices.normalize(np.zeros(1, dtype=np.int64), 0)
    with pytest.raises(IndexError, match="index -1 is out of range"):
        indices.normalize(np.asarray([-1], dtype=np.int64), 0)


def test_the_native_sequence_check_takes_only_lists_and_tuples_of_plain_ints() -> None:
    """What it hands back None for goes through Python's checks, which name the item."""

    class Batch(list):  # a subclass may override iteration
        pass

    assert _native.checked_int_sequence([3, -1], LENGTH).tolist() == [3, LENGTH - 1]
    assert _native.checked_int_sequence((), LENGTH).tolist() == []
    for other in ([1, True], [1, np.int64(2)], [1, 2**63], Batch([1]), np.arange(3), range(3), "12"):
        assert _native.checked_int_sequence(other, LENGTH) is None, other
    with pytest.raises(IndexError, match=f"index {LENGTH} is out of range"):
        _native.checked_int_sequence([0, LENGTH], LENGTH)


def test_the_native_check_refuses_what_is_not_a_batch() -> None:
    with pytest.raises(ValueError, match="1-D"):
        _native.checked_ordinals(np.zeros((2, 2), dtype=np.int64), LENGTH)
    with pytest.raises(ValueError, match="negative"):
        _native.checked_ordinals(np.zeros(1, dtype=np.int64), -1)


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("ordinals") / "ds"
    write_dataset(root, 50, records_per_shard=7)
    return str(root)


@pytest.fixture(scope="module")
def view(sharded: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    # Every third record, then the first ten again: runs of one record, and
    # files that hold several runs.
    picked = list(range(0, 50, 3)) + list(range(10))
    root = tmp_path_factory.mktemp("ordinals-view") / "view"
    sds.open(sharded).select(picked).publish(str(root), dataset_id="view", snapshot_id="v1")
    return str(root)


@pytest.mark.parametrize("which", ["sharded", "view"])
def test_every_ordinal_locates_as_numpys_search_does(which: str, request: pytest.FixtureRequest) -> None:
    table = addressing.shard_table(sds.open(request.getfixturevalue(which)))
    length = int(table.starts[-1])
    ordinals = np.random.default_rng(1).permutation(np.repeat(np.arange(length), 2)).astype(np.int64)
    files, records = table.locate(ordinals)
    expected_files, expected_records = numpy_locate(table, ordinals)
    assert files.tolist() == expected_files.tolist()
    assert records.tolist() == expected_records.tolist()


def test_the_view_holds_files_of_several_runs(view: str) -> None:
    table = addressing.shard_table(sds.open(view))
    assert len(set(table.files.tolist())) < len(table.files)


@pytest.mark.parametrize("outside", [-1, 50, 2**62])
def test_an_ordinal_outside_the_table_is_refused(sharded: str, outside: int) -> None:
    table = addressing.shard_table(sds.open(sharded))
    with pytest.raises(IndexError, match=f"ordinal {outside} is outside the shard table"):
        table.locate(np.asarray([3, outside], dtype=np.int64))


def test_a_table_out_of_order_gives_places_inside_it_and_never_past_it() -> None:
    starts = np.asarray([0, 40, 10, 30, 50], dtype=np.int64)
    skips = np.asarray([0, 1, 2, 3, 0], dtype=np.int64)
    files = np.asarray([7, 8, 9, 6, 5], dtype=np.int64)
    located_files, _ = _native.locate_ordinals(starts, skips, files, np.arange(50, dtype=np.int64))
    assert set(located_files.tolist()) <= {7, 8, 9, 6}


def test_columns_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="one length"):
        _native.locate_ordinals(
            np.asarray([0, 5], dtype=np.int64),
            np.asarray([0], dtype=np.int64),
            np.asarray([0, 0], dtype=np.int64),
            np.asarray([1], dtype=np.int64),
        )


def test_a_table_of_no_runs_refuses_any_ordinal() -> None:
    empty = np.zeros(0, dtype=np.int64)
    assert _native.locate_ordinals(empty, empty, empty, empty)[0].size == 0
    with pytest.raises(IndexError, match="no runs"):
        _native.locate_ordinals(empty, empty, empty, np.zeros(1, dtype=np.int64))


def test_a_dataset_written_into_many_small_shards_reads_every_record_where_it_is(tmp_path: Path) -> None:
    import sds_loader

    root = tmp_path / "small"
    write_dataset(root, 40, records_per_shard=3)
    reference = sds.open(str(root))
    order = np.random.default_rng(2).permutation(40).astype(np.int64)
    batch = sds_loader.BatchReader(str(root), fields=("samples",)).read(order)
    for row, ordinal in zip(batch["samples"], order.tolist(), strict=True):
        assert row.tobytes() == reference[ordinal]["samples"].data.tobytes()


def test_a_batch_read_by_ordinal_alone_is_the_batch_read_by_place(sharded: str) -> None:
    """read_ordinals locates each ordinal in the table keep_runs kept, as ShardTable.locate does."""
    native, table = open_native(sharded)
    ordinals = [49, 0, 7, 7, 13, 48, 6]
    by_place = native_read(native, table, ordinals, threads=1)
    files, records = table.locate(np.asarray(ordinals[:1], dtype=np.int64))
    fields, _ = native.probe(int(files[0]), int(records[0]), ordinals[0])
    layout = _native.BatchLayout()
    for name, key, dtype, shape in fields:
        layout.add_field(name, key, dtype, tuple(shape))
    layout.add_target("label", "i")
    by_ordinal = {name: np.zeros_like(array) for name, array in by_place.items()}
    wanted = np.asarray(ordinals, dtype=np.int64)
    with pytest.raises(IndexError, match="holds no runs"):
        native.read_ordinals(wanted, layout, by_ordinal, 1)
    native.keep_runs(table.starts, table.skips, table.files)
    assert not native.read_ordinals(wanted, layout, by_ordinal, 1).any()
    for name, array in by_place.items():
        assert np.array_equal(by_ordinal[name], array), name
    with pytest.raises(IndexError, match="ordinal 50 is outside the shard table's runs"):
        two = {name: array[:2].copy() for name, array in by_ordinal.items()}
        native.read_ordinals(np.asarray([3, 50], dtype=np.int64), layout, two, 1)


def test_a_kept_table_may_name_only_the_sets_shards(sharded: str) -> None:
    native, table = open_native(sharded)
    files = table.files.copy()
    files[0] = native.num_files
    with pytest.raises(ValueError, match=f"names shard number {native.num_files} of {native.num_files}"):
        native.keep_runs(table.starts, table.skips, files)
    with pytest.raises(ValueError, match="of one length"):
        native.keep_runs(table.starts, table.skips[:-1], table.files)
