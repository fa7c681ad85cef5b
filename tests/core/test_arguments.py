"""Bad arguments are refused with the right exception, before any byte is written."""

from __future__ import annotations

import os
import pickle
import re

import numpy as np
import pytest
import signal_dataset as sds
from plain_records import COUNT, plain_record
from sds_factory import assert_batch, field, write_dataset

import sds_loader

FIELDS = ("iq", "taps")
SENTINEL = 0xA5


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("plain")
    write_dataset(root, COUNT, plain_record, records_per_shard=4)
    return os.fspath(root)


@pytest.fixture
def reader(plain) -> sds_loader.BatchReader:
    return sds_loader.BatchReader(plain, targets=("label", "gain"))


# -- indices -----------------------------------------------------------------


@pytest.mark.parametrize(
    "indices",
    [
        [1.0],
        [0, 2.5],
        np.asarray([1.0, 2.0]),
        [True],
        [0, False],
        np.asarray([True, False]),
        "01",
        b"\x00\x01",
        ["1"],
        [None],
        3,
        None,
    ],
    ids=[
        "float",
        "int-and-float",
        "float-array",
        "bool",
        "int-and-bool",
        "bool-array",
        "str",
        "bytes",
        "list-of-str",
        "list-of-none",
        "bare-int",
        "none",
    ],
)
def test_indices_of_the_wrong_type(reader, indices):
    with pytest.raises(TypeError):
        reader.read(indices)


@pytest.mark.parametrize(
    "indices", [np.zeros((2, 2), np.int64), np.asarray([[0, 1, 2]]), np.zeros((1, 1, 1), np.int32)]
)
def test_indices_of_more_than_one_dimension(reader, indices):
    with pytest.raises(ValueError):
        reader.read(indices)


@pytest.mark.parametrize(
    "indices, bad",
    [
        ([COUNT], COUNT),
        ([0, 1, COUNT + 5], COUNT + 5),
        ([-COUNT - 1], -COUNT - 1),
        (np.asarray([3, 2**40]), 2**40),
        (np.asarray([2**63 + 5], dtype=np.uint64), 2**63 + 5),
    ],
    ids=["one-past-end", "after-valid", "too-negative", "huge", "uint64-overflow"],
)
def test_indices_out_of_range(reader, indices, bad):
    with pytest.raises(IndexError) as raised:
        reader.read(indices)
    assert str(bad) in str(raised.value)


@pytest.mark.parametrize(
    "indices",
    [
        np.asarray([7, 0, 3], dtype=np.int32),
        np.asarray([7, 0, 3], dtype=np.uint8),
        np.asarray([-3, 0, 3], dtype=np.int64),
        [np.int64(7), np.int16(0), 3],
        (7, 0, 3),
        range(7, -1, -7),
    ],
    ids=["int32-array", "uint8-array", "negative-int64-array", "numpy-scalars", "tuple", "range"],
)
def test_integer_spellings_are_accepted(reader, plain, indices):
    batch = reader.read(indices)
    ordinals = [int(i) % COUNT for i in indices]
    assert_batch(plain, batch, ordinals, FIELDS, ("label", "gain"))


@pytest.mark.parametrize(
    "empty", [[], (), np.zeros(0, np.int64), np.zeros(0, np.uint32)], ids=["list", "tuple", "int64", "uint32"]
)
def test_empty_batch_has_the_trailing_shapes(plain, empty):
    fresh = sds_loader.BatchReader(plain, targets=("label", "gain"))  # no batch read yet
    batch = fresh.read(empty)
    assert set(batch) == {"iq", "taps", "label", "gain"}
    assert batch["iq"].shape == (0, 2, 16) and batch["iq"].dtype == np.complex64
    assert batch["taps"].shape == (0, 3, 4) and batch["taps"].dtype == np.int16
    assert batch["label"].shape == (0,) and batch["label"].dtype == np.int64
    assert batch["gain"].shape == (0,) and batch["gain"].dtype == np.float64


@pytest.mark.parametrize("index", [1.0, True, np.bool_(False), "0", None, [0]])
def test_single_index_of_the_wrong_type(reader, index):
    with pytest.raises(TypeError):
        reader[index]


@pytest.mark.parametrize("index", [COUNT, -COUNT - 1, 2**62])
def test_single_index_out_of_range(reader, index):
    with pytest.raises(IndexError):
        reader[index]


def test_single_negative_index(reader, plain):
    got = reader[-COUNT]
    assert got["iq"].tobytes() == sds.open(plain)[0]["iq"].data.tobytes()
    assert got["iq"].shape == (2, 16)


# -- out= ----------------------------------------------------------------------

BATCH = [1, 8, 3]


def sentinel_buffers(count: int = len(BATCH)) -> dict[str, np.ndarray]:
    out = {
        "iq": np.empty((count, 2, 16), np.complex64),
        "taps": np.empty((count, 3, 4), np.int16),
        "label": np.empty(count, np.int64),
        "gain": np.empty(count, np.float64),
    }
    for array in out.values():
        array.view(np.uint8)[...] = SENTINEL
    return out


def untouched(array: np.ndarray) -> bool:
    return bool((np.frombuffer(array.tobytes(), np.uint8) == SENTINEL).all())


def _wrong_shape(out):
    out["taps"] = np.empty((len(BATCH), 4, 3), np.int16)


def _wrong_batch(out):
    out["iq"] = np.empty((len(BATCH) + 1, 2, 16), np.complex64)


def _missing_trailing_axis(out):
    out["iq"] = np.empty((len(BATCH), 32), np.complex64)


def _wrong_dtype(out):
    out["iq"] = np.empty((len(BATCH), 2, 16), np.complex128)


def _wrong_target_dtype(out):
    out["label"] = np.empty(len(BATCH), np.float64)


def _narrow_target_dtype(out):
    out["label"] = np.empty(len(BATCH), np.int32)


def _read_only(out):
    out["taps"].setflags(write=False)


def _strided(out):
    out["taps"] = np.empty((2 * len(BATCH), 3, 4), np.int16)[::2]


def _fortran(out):
    out["taps"] = np.asfortranarray(np.empty((len(BATCH), 3, 4), np.int16))


def _strided_target(out):
    out["gain"] = np.empty(2 * len(BATCH), np.float64)[::2]


def _missing(out):
    del out["taps"]


def _missing_target(out):
    del out["label"]


def _unknown(out):
    out["extra"] = np.empty(len(BATCH), np.int64)


BREAKERS = [
    (_wrong_shape, "taps"),
    (_wrong_batch, "iq"),
    (_missing_trailing_axis, "iq"),
    (_wrong_dtype, "iq"),
    (_wrong_target_dtype, "label"),
    (_narrow_target_dtype, "label"),
    (_read_only, "taps"),
    (_strided, "taps"),
    (_fortran, "taps"),
    (_strided_target, "gain"),
    (_missing, "taps"),
    (_missing_target, "label"),
    (_unknown, "extra"),
]


@pytest.mark.parametrize("breaker, culprit", BREAKERS, ids=[b.__name__.strip("_") for b, _ in BREAKERS])
def test_bad_out_is_refused_before_writing(reader, breaker, culprit):
    out = sentinel_buffers()
    breaker(out)
    for array in out.values():  # whatever the breaker put in starts as sentinel too
        if array.flags.writeable:
            array[...] = np.frombuffer(bytes([SENTINEL]) * array.nbytes, array.dtype).reshape(array.shape)
    with pytest.raises(ValueError) as raised:
        reader.read(BATCH, out=out)
    assert culprit in str(raised.value)
    for name, array in out.items():
        assert untouched(array), f"out[{name!r}] was written before the error"


def test_out_that_is_not_a_mapping(reader):
    with pytest.raises(TypeError):
        reader.read(BATCH, out=[np.empty((3, 2, 16), np.complex64)])


def test_out_value_without_buffer_protocol(reader):
    out = sentinel_buffers()
    out["label"] = [0, 0, 0]
    with pytest.raises(TypeError):
        reader.read(BATCH, out=out)
    assert all(untouched(out[name]) for name in ("iq", "taps", "gain"))


def test_good_out_after_a_refused_one(reader, plain):
    bad = sentinel_buffers()
    _wrong_dtype(bad)
    with pytest.raises(ValueError):
        reader.read(BATCH, out=bad)
    good = sentinel_buffers()
    reader.read(BATCH, out=good)
    assert_batch(plain, good, BATCH, FIELDS, ("label", "gain"))


def test_empty_batch_with_empty_out(reader):
    out = sentinel_buffers(0)
    batch = reader.read([], out=out)
    assert {name: array.shape for name, array in batch.items()} == {
        "iq": (0, 2, 16),
        "taps": (0, 3, 4),
        "label": (0,),
        "gain": (0,),
    }


# -- fields= and targets= ----------------------------------------------------


def test_missing_field_is_named(plain):
    with pytest.raises(ValueError, match="nosuch"):
        sds_loader.BatchReader(plain, fields=("iq", "nosuch")).read([0, 1])


def test_missing_field_is_named_on_single_reads(plain):
    with pytest.raises(ValueError, match="absent"):
        sds_loader.BatchReader(plain, fields=("absent",))[2]


def target_record(ordinal: int) -> sds.Record:
    metadata = {
        "label": ordinal,
        "listed": [ordinal, ordinal + 1],
        "named": f"n{ordinal}",
        "nested": {"k": ordinal},
        "nothing": None,
    }
    if ordinal < 3:
        metadata["early"] = ordinal * 10
    return sds.Record(
        id=f"t{ordinal}",
        fields={"v": field(np.full(4, ordinal, dtype=np.float32))},
        metadata=metadata,
    )


@pytest.fixture(scope="module")
def target_dataset(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("targets")
    write_dataset(root, 6, target_record, records_per_shard=4)
    return os.fspath(root)


@pytest.mark.parametrize("key", ["absent", "listed", "nested", "nothing"])
def test_bad_target_raises_target_error(target_dataset, key):
    assert issubclass(sds_loader.TargetError, ValueError)
    with pytest.raises(sds_loader.TargetError, match=key):
        sds_loader.BatchReader(target_dataset, targets=("label", key)).read([1, 2])


def test_a_string_target_is_a_class_index(target_dataset):
    # Strings are class labels: indices into the sorted values the dataset holds.
    reader = sds_loader.BatchReader(target_dataset, targets=("label", "named"))
    assert reader.labels == {"named": tuple(f"n{i}" for i in range(6))}
    assert reader.read([1, 2])["named"].tolist() == [1, 2]


@pytest.mark.parametrize("indices", [[0, 4], [1, 2, 5, 0], [5]])
def test_target_missing_from_a_later_record(target_dataset, indices):
    reader = sds_loader.BatchReader(target_dataset, targets=("early",))
    if indices[0] >= 3:
        reader.read([0])  # the layout is learnt from a record that has the key
    with pytest.raises(sds_loader.TargetError, match="early"):
        reader.read(indices)


def test_target_present_in_every_record_of_the_batch(target_dataset):
    batch = sds_loader.BatchReader(target_dataset, targets=("early", "label")).read([2, 0, 1])
    assert batch["early"].tolist() == [20, 0, 10]
    assert batch["label"].tolist() == [2, 0, 1]


# -- mixed shapes -------------------------------------------------------------


def two_shapes(ordinal: int) -> sds.Record:
    """Records 0-3 hold x of shape (2, 8), records 4-6 of shape (2, 16); y always (3,)."""
    width = 8 if ordinal < 4 else 16
    rng = np.random.default_rng(9000 + ordinal)
    return sds.Record(
        id=f"shape-{ordinal}",
        fields={
            "x": field(rng.standard_normal((2, width)).astype(np.float32)),
            "y": field(np.asarray([ordinal, 2 * ordinal, 3 * ordinal], dtype=np.int8)),
        },
        metadata={"label": ordinal},
    )


def two_dtypes(ordinal: int) -> sds.Record:
    dtype = np.float32 if ordinal < 3 else np.float64
    return sds.Record(id=f"dtype-{ordinal}", fields={"x": field(np.full(5, ordinal, dtype=dtype))})


@pytest.fixture(scope="module")
def shapes_dataset(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("shapes")
    write_dataset(root, 7, two_shapes, records_per_shard=3)
    return os.fspath(root)


@pytest.fixture(scope="module")
def dtypes_dataset(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("two-dtypes")
    write_dataset(root, 5, two_dtypes)
    return os.fspath(root)


def _shape_pattern(*dims: int) -> str:
    return r"[\(\[]" + r",\s*".join(map(str, dims)) + r"[\)\]]"


@pytest.mark.parametrize("indices", [[0, 5], [5, 0], [1, 2, 3, 4], [6, 6, 2]])
def test_mixed_shapes_in_one_batch(shapes_dataset, indices):
    assert issubclass(sds_loader.MixedShapesError, ValueError)
    reader = sds_loader.BatchReader(shapes_dataset)
    with pytest.raises(sds_loader.MixedShapesError) as raised:
        reader.read(indices)
    message = str(raised.value)
    assert re.search(_shape_pattern(2, 8), message), message
    assert re.search(_shape_pattern(2, 16), message), message
    for ordinal in indices:
        assert re.search(rf"\b{ordinal}\b", message), (ordinal, message)


def test_mixed_shapes_after_a_good_batch(shapes_dataset):
    reader = sds_loader.BatchReader(shapes_dataset)
    assert_batch(shapes_dataset, reader.read([0, 1]), [0, 1], ("x", "y"))
    with pytest.raises(sds_loader.MixedShapesError):
        reader.read([2, 3, 4])


def test_batches_of_one_shape_each(shapes_dataset):
    reader = sds_loader.BatchReader(shapes_dataset, targets=("label",))
    second = reader.read([4, 6, 5, 4])
    assert second["x"].shape == (4, 2, 16)
    assert_batch(shapes_dataset, second, [4, 6, 5, 4], ("x", "y"), ("label",))
    first = reader.read([3, 0])
    assert first["x"].shape == (2, 2, 8)
    assert_batch(shapes_dataset, first, [3, 0], ("x", "y"), ("label",))
    with pytest.raises(sds_loader.MixedShapesError):
        reader.read([0, 4])
    # The reader is still usable after the refusal.
    assert_batch(shapes_dataset, reader.read([5, 6]), [5, 6], ("x", "y"), ("label",))
    assert reader[1]["x"].shape == (2, 8)
    assert reader[6]["x"].shape == (2, 16)


def test_selecting_only_agreeing_fields(shapes_dataset):
    reader = sds_loader.BatchReader(shapes_dataset, fields=("y",))
    assert_batch(shapes_dataset, reader.read([0, 5, 3, 6]), [0, 5, 3, 6], ("y",))


def test_mixed_dtypes_in_one_batch(dtypes_dataset):
    reader = sds_loader.BatchReader(dtypes_dataset)
    with pytest.raises(sds_loader.MixedShapesError) as raised:
        reader.read([0, 4])
    assert "float32" in str(raised.value) and "float64" in str(raised.value)
    assert_batch(dtypes_dataset, reader.read([4, 3]), [4, 3], ("x",))
    assert_batch(dtypes_dataset, reader.read([2, 0]), [2, 0], ("x",))


# -- constructor arguments ----------------------------------------------------


@pytest.mark.parametrize("threads", [0, -1])
def test_threads_must_be_positive(plain, threads):
    with pytest.raises(ValueError, match="threads"):
        sds_loader.BatchReader(plain, threads=threads)


@pytest.mark.parametrize("limit", [0, -3])
def test_max_open_files_must_be_positive(plain, limit):
    with pytest.raises(ValueError, match="max_open_files"):
        sds_loader.BatchReader(plain, max_open_files=limit)


# -- pickling -----------------------------------------------------------------


@pytest.mark.parametrize("read_first", [False, True], ids=["fresh", "used"])
def test_pickled_reader_reads_the_same(plain, read_first):
    reader = sds_loader.BatchReader(plain, fields=("taps", "iq"), targets=("gain",), threads=2)
    indices = [9, 0, 4, 4, -1, 6]
    if read_first:
        reader.read([1, 2])
    clone = pickle.loads(pickle.dumps(reader))
    assert len(clone) == len(reader) == COUNT
    mine, theirs = reader.read(indices), clone.read(indices)
    assert set(mine) == set(theirs) == {"taps", "iq", "gain"}
    for name in mine:
        assert mine[name].dtype == theirs[name].dtype
        assert mine[name].shape == theirs[name].shape
        assert mine[name].tobytes() == theirs[name].tobytes()
    assert_batch(plain, theirs, [i % COUNT for i in indices], ("taps", "iq"), ("gain",))
    assert clone[3]["taps"].tobytes() == sds.open(plain)[3]["taps"].data.tobytes()


def test_a_target_named_like_a_field_is_refused(tmp_path):
    from sds_factory import capture

    def make(ordinal):
        record = capture(ordinal, samples=8)
        return sds.Record(
            id=record.id,
            fields={"samples": record["samples"], "label": field(np.zeros(1, np.int8))},
            metadata=record.metadata,
        )

    write_dataset(tmp_path, 2, make)
    with pytest.raises(ValueError, match="'label' names both a field and a target"):
        sds_loader.BatchReader(tmp_path, targets=("label",)).read([0])
    batch = sds_loader.BatchReader(tmp_path, fields=("samples",), targets=("label",)).read([1, 0])
    assert batch["label"].tolist() == [1, 0]


def test_an_empty_dataset_has_length_zero_and_says_why_it_cannot_batch(tmp_path):
    write_dataset(tmp_path, 0)
    reader = sds_loader.BatchReader(tmp_path)
    assert len(reader) == 0
    with pytest.raises(ValueError, match="holds no records"):
        reader.read([])
    with pytest.raises(IndexError):
        reader.read([0])
