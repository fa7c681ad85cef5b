"""BatchReader returns exactly what signal_dataset returns, byte for byte.

Every dataset here is written by signal_dataset's own writer and every batch is
compared with `signal_dataset.open(root)[i]`, so the reference is the library
the datasets come from, never a re-implementation of it. Datasets are tiny and
written once per module.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
import signal_dataset as sds
from sds_factory import (
    BLOCK_HEADER_SIZE,
    BLOCK_SIZE,
    CHUNK_HEADER_SIZE,
    WRITER_OPTIONS,
    assert_batch,
    data_shards,
    field,
    read_chunks,
    record_chunks,
    write_dataset,
)

import sds_loader


class _CountedReader(sds_loader.BatchReader):
    """BatchReader, remembered so the test can check which path served it."""

    made: list[sds_loader.BatchReader] = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _CountedReader.made.append(self)


@pytest.fixture(autouse=True)
def native_path_served(monkeypatch):
    """Every record these tests read must come from the native core: a test
    passing on signal_dataset's fallback would prove nothing about it."""
    _CountedReader.made.clear()
    monkeypatch.setattr(sds_loader, "BatchReader", _CountedReader)
    yield
    for reader in _CountedReader.made:
        assert reader.stats.fallback_records == 0, (reader.uri, reader.stats)
    served = sum(reader.stats.native_records for reader in _CountedReader.made)
    assert served > 0 or not _CountedReader.made, [reader.stats for reader in _CountedReader.made]


MIXED_FIELDS = ("a", "b", "c")
MIXED_TARGETS = ("label", "snr_db", "flag")
MIXED_COUNT = 13


def mixed(ordinal: int) -> sds.Record:
    """Three fields of different dtypes and ranks, and an int, a float and a bool target."""
    rng = np.random.default_rng(1000 + ordinal)
    a = (rng.standard_normal((2, 48)) + 1j * rng.standard_normal((2, 48))).astype(np.complex64)
    b = rng.integers(-30000, 30000, size=(3, 5), dtype=np.int16)
    c = rng.standard_normal(7).astype(np.float32)
    return sds.Record(
        id=f"mixed-{ordinal:04d}",
        fields={"a": field(a), "b": field(b), "c": field(c)},
        metadata={
            "label": ordinal % 5,
            "snr_db": float(rng.uniform(-5, 20)),
            "flag": ordinal % 3 == 0,
        },
    )


def scrambled(count: int, seed: int = 0) -> list[int]:
    """Every ordinal in a shuffled order, then repeats, then negative spellings."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(count).tolist()
    repeats = rng.integers(0, count, size=max(2, count // 3)).tolist()
    negatives = [-1, -count, -(count // 2) - 1]
    return order + repeats + [order[0]] + negatives


def positive(indices: list[int], count: int) -> list[int]:
    return [index % count for index in indices]


# -- compression and grouping -----------------------------------------------


@pytest.fixture(scope="module", params=WRITER_OPTIONS, ids=lambda option: option or "default")
def compressed(request, tmp_path_factory) -> str:
    """13 mixed records in shards of 5, 5 and 3, written with one writer option."""
    root = tmp_path_factory.mktemp("compressed")
    write_dataset(root, MIXED_COUNT, mixed, records_per_shard=5, writer_options=request.param)
    return os.fspath(root)


def test_every_record_in_scrambled_order(compressed):
    reader = sds_loader.BatchReader(compressed, targets=MIXED_TARGETS)
    assert len(reader) == MIXED_COUNT
    indices = scrambled(MIXED_COUNT)
    batch = reader.read(indices)
    assert_batch(compressed, batch, positive(indices, MIXED_COUNT), MIXED_FIELDS, MIXED_TARGETS)


def test_successive_batches_do_not_leak_into_each_other(compressed):
    reader = sds_loader.BatchReader(compressed)
    first = [12, 0, 7, 7, 3]
    second = [1, 2, 11, 5]
    one = reader.read(first)
    two = reader.read(second)
    again = reader.read(first)
    assert_batch(compressed, one, first, MIXED_FIELDS)
    assert_batch(compressed, two, second, MIXED_FIELDS)
    for name in MIXED_FIELDS:
        assert again[name].tobytes() == one[name].tobytes(), name


def test_one_record_at_a_time(compressed):
    reader = sds_loader.BatchReader(compressed)
    for index in range(MIXED_COUNT):
        assert_batch(compressed, reader.read([index]), [index], MIXED_FIELDS)


@pytest.mark.parametrize("verify", [True, False], ids=["verified", "unverified"])
def test_checksum_setting_does_not_change_bytes(compressed, verify):
    reader = sds_loader.BatchReader(compressed, verify_checksums=verify, targets=("label",))
    indices = scrambled(MIXED_COUNT, seed=3)
    assert_batch(compressed, reader.read(indices), positive(indices, MIXED_COUNT), MIXED_FIELDS, ("label",))


def test_thread_counts_agree(compressed):
    """Every writer option, decoded on helper threads as well as the caller's.

    These batches are far below the work a warm batch needs before it wakes a
    helper, so the threshold is lifted (work_per_helper = 0) and the test
    checks that helpers really decoded part of a batch: a caller that takes
    every run before a helper wakes would leave the matrix single-threaded.
    """
    indices = scrambled(MIXED_COUNT, seed=5) * 3
    one = sds_loader.BatchReader(compressed, threads=1, targets=MIXED_TARGETS).read(indices)
    reader = sds_loader.BatchReader(compressed, threads=3, targets=MIXED_TARGETS)
    reader.process_state().native.work_per_helper = 0
    # A woken helper may still lose the race for a batch this small, above
    # all on a loaded machine: read it again until one has decoded a run.
    deadline = time.monotonic() + 20
    while True:
        three = reader.read(indices)
        assert set(one) == set(three)
        for name in one:
            assert one[name].dtype == three[name].dtype, name
            assert one[name].shape == three[name].shape, name
            assert one[name].tobytes() == three[name].tobytes(), name
        if reader.stats.helped_batches or time.monotonic() > deadline:
            break
    assert reader.stats.helped_batches > 0, f"no helper thread decoded any of {reader.stats.batches} batches"
    assert_batch(compressed, three, positive(indices, MIXED_COUNT), MIXED_FIELDS, MIXED_TARGETS)


def test_a_small_warm_batch_stays_on_the_callers_thread(compressed):
    """The same batch at the default threshold: too little work to wake a helper."""
    reader = sds_loader.BatchReader(compressed, threads=3, targets=MIXED_TARGETS)
    indices = scrambled(MIXED_COUNT, seed=5)
    for _ in range(5):
        assert_batch(
            compressed, reader.read(indices), positive(indices, MIXED_COUNT), MIXED_FIELDS, MIXED_TARGETS
        )
    assert reader.stats.batches == 5 and reader.stats.helped_batches == 0


# -- fields, targets, out=, single records (on the default layout) ----------


@pytest.fixture(scope="module")
def default_mixed(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("mixed")
    write_dataset(root, MIXED_COUNT, mixed, records_per_shard=5)
    return os.fspath(root)


@pytest.mark.parametrize(
    "fields",
    [("b",), ("a",), ("c", "a"), ("b", "c", "a")],
    ids=lambda fields: "+".join(fields),
)
def test_field_selection(default_mixed, fields):
    reader = sds_loader.BatchReader(default_mixed, fields=fields)
    indices = [4, 9, 0, 4, -2]
    batch = reader.read(indices)
    assert_batch(default_mixed, batch, positive(indices, MIXED_COUNT), fields)


def test_field_selection_as_a_single_string(default_mixed):
    batch = sds_loader.BatchReader(default_mixed, fields="c").read([1, 2])
    assert_batch(default_mixed, batch, [1, 2], ("c",))


def test_targets_have_their_own_dtypes(default_mixed):
    reader = sds_loader.BatchReader(default_mixed, fields=("c",), targets=MIXED_TARGETS)
    indices = scrambled(MIXED_COUNT, seed=7)
    batch = reader.read(indices)
    assert batch["label"].dtype == np.int64
    assert batch["flag"].dtype == np.int64  # bools are counted as integers
    assert batch["snr_db"].dtype == np.float64
    reference = sds.open(default_mixed)
    ordinals = positive(indices, MIXED_COUNT)
    assert batch["label"].tolist() == [reference[i].metadata["label"] for i in ordinals]
    assert batch["flag"].tolist() == [int(reference[i].metadata["flag"]) for i in ordinals]
    expected_snr = np.asarray([reference[i].metadata["snr_db"] for i in ordinals], dtype=np.float64)
    assert batch["snr_db"].tobytes() == expected_snr.tobytes()
    assert_batch(default_mixed, batch, ordinals, ("c",), MIXED_TARGETS)


def test_targets_only(default_mixed):
    batch = sds_loader.BatchReader(default_mixed, fields=(), targets=("label",)).read([3, 1])
    assert set(batch) == {"label"}
    assert batch["label"].tolist() == [3, 1]


def _empty_like_batch(root: str, count: int, fields, targets) -> dict[str, np.ndarray]:
    record = sds.open(root)[0]
    out = {name: np.empty((count, *record[name].data.shape), record[name].data.dtype) for name in fields}
    for key in targets:
        value = record.metadata[key]
        dtype = np.float64 if isinstance(value, float) else np.int64
        out[key] = np.empty(count, dtype)
    return out


def test_out_buffers_are_filled_in_place(default_mixed):
    reader = sds_loader.BatchReader(default_mixed, targets=MIXED_TARGETS)
    indices = [5, 0, 12, 5, -1, 8]
    out = _empty_like_batch(default_mixed, len(indices), MIXED_FIELDS, MIXED_TARGETS)
    for array in out.values():
        array.view(np.uint8)[...] = 0xA5
    addresses = {name: array.ctypes.data for name, array in out.items()}
    batch = reader.read(indices, out=out)
    assert set(batch) == set(out)
    for name, array in batch.items():
        assert array.ctypes.data == addresses[name], name
        assert np.shares_memory(array, out[name]), name
        assert array.shape == out[name].shape, name
    # What the caller holds is the batch, not only what was returned.
    assert_batch(default_mixed, out, positive(indices, MIXED_COUNT), MIXED_FIELDS, MIXED_TARGETS)


def test_out_buffers_reused_for_the_next_batch(default_mixed):
    reader = sds_loader.BatchReader(default_mixed, fields=("a", "b"))
    out = _empty_like_batch(default_mixed, 3, ("a", "b"), ())
    reader.read([0, 1, 2], out=out)
    reader.read([10, 11, 2], out=out)
    assert_batch(default_mixed, out, [10, 11, 2], ("a", "b"))


@pytest.mark.parametrize("index", [0, 6, 12, -1, -13])
def test_single_record_by_index(default_mixed, index):
    reader = sds_loader.BatchReader(default_mixed, targets=("label", "snr_db"))
    got = reader[index]
    expected = sds.open(default_mixed)[index]
    assert set(got) == set(MIXED_FIELDS) | {"label", "snr_db"}
    for name in MIXED_FIELDS:
        reference = expected[name].data
        assert got[name].dtype == reference.dtype, name
        assert got[name].shape == reference.shape, name  # no batch axis
        assert got[name].tobytes() == reference.tobytes(), name
    assert got["label"] == expected.metadata["label"]
    assert got["snr_db"] == expected.metadata["snr_db"]


# -- every dtype -------------------------------------------------------------

DTYPES = [
    np.bool_,
    np.uint8,
    np.int8,
    np.uint16,
    np.int16,
    np.uint32,
    np.int32,
    np.uint64,
    np.int64,
    np.float16,
    np.float32,
    np.float64,
    np.complex64,
]
DTYPE_NAMES = tuple(np.dtype(dtype).name for dtype in DTYPES)


def awkward_values(dtype: np.dtype, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Values that punish any conversion: full-range integers, and for floats
    random bit patterns (NaN payloads, infinities, subnormals, negative zero)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    bits = np.dtype(f"u{dtype.itemsize}")
    raw = rng.integers(0, np.iinfo(bits).max, size=shape, dtype=bits, endpoint=True)
    values = raw.view(dtype).copy()
    flat = values.reshape(-1)
    if flat.size >= 2 and dtype.kind == "f":
        flat[0] = -0.0
        flat[1] = np.inf
    return values


def every_dtype(ordinal: int) -> sds.Record:
    rng = np.random.default_rng(2000 + ordinal)
    fields = {np.dtype(dtype).name: field(awkward_values(dtype, (3, 5), rng)) for dtype in DTYPES}
    return sds.Record(id=f"dtypes-{ordinal}", fields=fields, metadata={"label": ordinal})


@pytest.fixture(scope="module", params=[None, "group_size:1,uncompressed"], ids=["zstd", "uncompressed"])
def dtypes_dataset(request, tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("dtypes")
    write_dataset(root, 5, every_dtype, records_per_shard=3, writer_options=request.param)
    return os.fspath(root)


@pytest.mark.parametrize("name", DTYPE_NAMES)
def test_each_dtype(dtypes_dataset, name):
    reader = sds_loader.BatchReader(dtypes_dataset, fields=(name,))
    indices = [4, 0, 2, 2, 1, 3]
    batch = reader.read(indices)
    assert batch[name].dtype == np.dtype(name)
    assert batch[name].shape == (len(indices), 3, 5)
    assert_batch(dtypes_dataset, batch, indices, (name,))


def test_all_dtypes_in_one_batch(dtypes_dataset):
    reader = sds_loader.BatchReader(dtypes_dataset)
    batch = reader.read([3, 1, 4, 0, 2])
    assert_batch(dtypes_dataset, batch, [3, 1, 4, 0, 2], DTYPE_NAMES)


# -- ranks and empty axes ---------------------------------------------------

SHAPES = {
    "rank1": (7,),
    "rank2": (2, 5),
    "rank3": (3, 1, 4),
    "rank4": (2, 2, 1, 3),
    "rank5": (1, 2, 3, 1, 2),
    "empty1": (0,),
    "empty2": (3, 0),
    "empty3": (4, 0, 2),
}


def ranked(ordinal: int) -> sds.Record:
    rng = np.random.default_rng(3000 + ordinal)
    fields = {}
    for k, (name, shape) in enumerate(SHAPES.items()):
        dtype = (np.float32, np.int32, np.complex64, np.uint16)[k % 4]
        fields[name] = field(awkward_values(dtype, shape, rng))
    return sds.Record(id=f"ranked-{ordinal}", fields=fields)


@pytest.fixture(scope="module")
def ranks_dataset(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("ranks")
    write_dataset(root, 4, ranked, records_per_shard=3)
    return os.fspath(root)


@pytest.mark.parametrize("name", list(SHAPES))
def test_each_rank_and_empty_axis(ranks_dataset, name):
    reader = sds_loader.BatchReader(ranks_dataset, fields=(name,))
    indices = [3, 1, 0, 3, 2]
    batch = reader.read(indices)
    assert batch[name].shape == (len(indices), *SHAPES[name])
    assert_batch(ranks_dataset, batch, indices, (name,))


def test_empty_axis_next_to_full_fields(ranks_dataset):
    reader = sds_loader.BatchReader(ranks_dataset)
    batch = reader.read([2, 0, 1, 3])
    assert batch["empty2"].shape == (4, 3, 0)
    assert_batch(ranks_dataset, batch, [2, 0, 1, 3], tuple(SHAPES))
    single = reader[1]
    assert single["empty3"].shape == (4, 0, 2)
    assert single["rank5"].tobytes() == sds.open(ranks_dataset)[1]["rank5"].data.tobytes()


# -- record sizes against the 64 KiB block ------------------------------------

LARGE_VALUES = 75_000  # float32: 300 KB, several blocks per record


def large(ordinal: int) -> sds.Record:
    rng = np.random.default_rng(4000 + ordinal)
    return sds.Record(
        id=f"large-{ordinal}",
        fields={
            "wave": field(rng.standard_normal(LARGE_VALUES).astype(np.float32)),
            "tag": field(np.asarray([ordinal, -ordinal], dtype=np.int64)),
        },
        metadata={"label": ordinal},
    )


@pytest.fixture(
    scope="module",
    params=[None, "group_size:1,uncompressed", "group_size:2,snappy"],
    ids=["zstd", "uncompressed", "snappy-group2"],
)
def large_dataset(request, tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("large")
    write_dataset(root, 4, large, records_per_shard=3, writer_options=request.param)
    (first, *_) = sorted(data_shards(root), key=os.path.getsize, reverse=True)
    assert os.path.getsize(first) > 3 * BLOCK_SIZE  # the records really span blocks
    return os.fspath(root)


def test_records_larger_than_a_block(large_dataset):
    reader = sds_loader.BatchReader(large_dataset, targets=("label",))
    indices = [2, 0, 3, 1, 2, -4]
    batch = reader.read(indices)
    assert batch["wave"].shape == (len(indices), LARGE_VALUES)
    assert_batch(large_dataset, batch, positive(indices, 4), ("wave", "tag"), ("label",))


def test_large_records_across_threads(large_dataset):
    indices = [1, 2, 0, 3, 3, 0]
    one = sds_loader.BatchReader(large_dataset, threads=1).read(indices)
    three = sds_loader.BatchReader(large_dataset, threads=3).read(indices)
    assert one["wave"].tobytes() == three["wave"].tobytes()
    assert_batch(large_dataset, three, indices, ("wave", "tag"))


SMALL_COUNT = 300


def small(ordinal: int) -> sds.Record:
    values = np.arange(8, dtype=np.uint8) + np.uint8(ordinal % 251)
    return sds.Record(id=f"s{ordinal}", fields={"x": field(values)}, metadata={"label": ordinal})


@pytest.fixture(
    scope="module",
    params=[None, "group_size:1,uncompressed", "group_size:16,uncompressed"],
    ids=["zstd", "uncompressed", "uncompressed-group16"],
)
def small_dataset(request, tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("small")
    write_dataset(root, SMALL_COUNT, small, writer_options=request.param)
    (shard,) = data_shards(root)
    chunks = record_chunks(shard)
    assert chunks[0].end <= BLOCK_SIZE and chunks[1].end <= BLOCK_SIZE  # several chunks per block
    return os.fspath(root)


def test_many_small_records_sharing_a_block(small_dataset):
    reader = sds_loader.BatchReader(small_dataset, targets=("label",))
    indices = scrambled(SMALL_COUNT, seed=11)
    batch = reader.read(indices)
    ordinals = positive(indices, SMALL_COUNT)
    assert batch["label"].tolist() == ordinals
    assert_batch(small_dataset, batch, ordinals, ("x",), ("label",))


# -- shard and manifest layout ----------------------------------------------


@pytest.fixture(scope="module")
def one_record_shards(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("singletons")
    write_dataset(root, 5, mixed, records_per_shard=1)
    assert len(data_shards(root)) == 5
    return os.fspath(root)


def test_shards_of_one_record(one_record_shards):
    reader = sds_loader.BatchReader(one_record_shards, targets=MIXED_TARGETS)
    indices = [4, 0, 3, 3, 1, 2, -5]
    assert_batch(one_record_shards, reader.read(indices), positive(indices, 5), MIXED_FIELDS, MIXED_TARGETS)


@pytest.fixture(scope="module")
def paged_dataset(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("paged")
    write_dataset(root, 24, mixed, records_per_shard=2, shards_per_manifest=2)
    assert len(data_shards(root)) == 12
    pages = [name for _, _, names in os.walk(os.path.join(root, "manifests")) for name in names]
    assert len(pages) >= 6, pages
    return os.fspath(root)


def test_many_shards_over_several_manifest_pages(paged_dataset):
    reader = sds_loader.BatchReader(paged_dataset, targets=("label",))
    indices = scrambled(24, seed=13)
    assert_batch(paged_dataset, reader.read(indices), positive(indices, 24), MIXED_FIELDS, ("label",))


def test_few_open_files_over_many_shards(paged_dataset):
    reader = sds_loader.BatchReader(paged_dataset, max_open_files=1, threads=3)
    indices = scrambled(24, seed=17)
    assert_batch(paged_dataset, reader.read(indices), positive(indices, 24), MIXED_FIELDS)
    assert_batch(paged_dataset, reader.read(indices[::-1]), positive(indices[::-1], 24), MIXED_FIELDS)


# -- the field -> tensor mapping comes from each record's descriptor ----------


def shifting_fields(same_layout: bool):
    """Even records carry fields a and b, odd ones b and z: `b` is stored as
    tensor_000001 in the first and tensor_000000 in the second. With
    `same_layout` the neighbours of `b` share its dtype and shape, so only the
    descriptor tells the tensors apart."""

    def make(ordinal: int) -> sds.Record:
        rng = np.random.default_rng(5000 + ordinal)
        b = field(rng.standard_normal((2, 3)).astype(np.float32))
        if same_layout:
            other = field(rng.standard_normal((2, 3)).astype(np.float32))
        else:
            other = field(rng.integers(0, 9, size=4, dtype=np.int8))
        fields = {"a": other, "b": b} if ordinal % 2 == 0 else {"b": b, "z": other}
        return sds.Record(id=f"shift-{ordinal}", fields=fields)

    return make


@pytest.fixture(scope="module", params=[False, True], ids=["other-layouts", "same-layouts"])
def shifting_dataset(request, tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("shifting")
    write_dataset(root, 6, shifting_fields(request.param), records_per_shard=4)
    return os.fspath(root)


@pytest.mark.parametrize(
    "indices", [[0, 1, 2, 3, 4, 5], [1, 0], [0, 1, 2], [5, 3, 1, 4], [2, 2, 1, 1, 0]], ids=str
)
def test_common_field_of_records_with_different_field_sets(shifting_dataset, indices):
    reader = sds_loader.BatchReader(shifting_dataset, fields=("b",))
    assert_batch(shifting_dataset, reader.read(indices), indices, ("b",))


# -- uncompressed tensors read straight into their rows ------------------------

STRAIGHT_VALUES = 12_000  # float32: 48 KB a field, large enough to be read into rows


def straight(ordinal: int) -> sds.Record:
    """Large fields whose tensor keys change between even and odd records: `b`
    is tensor_000001 beside `a`, tensor_000000 beside `z`, same dtype and shape."""
    rng = np.random.default_rng(6000 + ordinal)
    b = field(rng.standard_normal(STRAIGHT_VALUES).astype(np.float32))
    other = field(rng.standard_normal(STRAIGHT_VALUES).astype(np.float32))
    fields = {"a": other, "b": b} if ordinal % 2 == 0 else {"b": b, "z": other}
    return sds.Record(id=f"straight-{ordinal}", fields=fields, metadata={"label": ordinal})


@pytest.fixture(
    scope="module",
    params=["group_size:1,uncompressed", "group_size:3,uncompressed"],
    ids=["group1", "group3"],
)
def straight_dataset(request, tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("straight")
    write_dataset(root, 9, straight, records_per_shard=5, writer_options=request.param)
    return os.fspath(root)


@pytest.mark.parametrize("verify", [True, False], ids=["verified", "unverified"])
def test_uncompressed_tensors_read_straight_into_rows(straight_dataset, verify):
    """After a large uncompressed chunk, one thread reads the next chunks'
    tensors straight into their rows: keys that change from record to record,
    repeats and chunks of several records still read as signal_dataset reads them."""
    reader = sds_loader.BatchReader(
        straight_dataset, fields=("b",), targets=("label",), threads=1, verify_checksums=verify
    )
    for indices in ([0, 1, 2, 3], [8, 3, 3, 0, 5, 6, 1], list(range(9))[::-1], [4, 4, 2], [7]):
        assert_batch(straight_dataset, reader.read(indices), indices, ("b",), ("label",))
    both = sds_loader.BatchReader(straight_dataset, threads=1, verify_checksums=verify)
    assert_batch(straight_dataset, both.read([0, 2, 4]), [0, 2, 4], ("a", "b"))


# -- a block header interrupting a chunk header --------------------------------

SPLIT_RECORD_BASE = 65_000


def padded(size: int):
    """Records with a 300-byte field `x`; record 0 also carries `size` bytes of padding."""

    def make(ordinal: int) -> sds.Record:
        values = (np.arange(300, dtype=np.int64) * 7 + ordinal).astype(np.uint8)
        fields = {"x": field(values)}
        if ordinal == 0:
            fields["pad"] = field(np.full(size, 0x5A, dtype=np.uint8))
        return sds.Record(id=f"p{ordinal}", fields=fields, metadata={"label": ordinal})

    return make


def _second_chunk_begin(root) -> int:
    (shard,) = data_shards(root)
    return read_chunks(shard)[2].begin  # signature, record 0, then the chunk under test


def write_split_dataset(base, count: int, bytes_before_boundary: int) -> str:
    """An uncompressed shard whose chunk after record 0 begins `bytes_before_boundary`
    bytes before the first block boundary (0: exactly on it). With one record that
    chunk is the footer index; with more it holds record 1."""
    target = BLOCK_SIZE - bytes_before_boundary
    size = SPLIT_RECORD_BASE
    for attempt in range(6):
        root = os.path.join(base, f"attempt{attempt}")
        write_dataset(root, count, padded(size), writer_options="group_size:1,uncompressed")
        begin = _second_chunk_begin(root)
        if begin == target:
            return root
        size += target - begin
    raise AssertionError(f"could not place a chunk at {target}")


@pytest.fixture(scope="module", params=[0, 1, 8, 20, 24, 39, 40, 41, 43], ids=lambda n: f"{n}B-before")
def split_record(request, tmp_path_factory) -> str:
    root = write_split_dataset(tmp_path_factory.mktemp("split-record"), 3, request.param)
    (shard,) = data_shards(root)
    chunk = record_chunks(shard)[1]
    assert chunk.begin == BLOCK_SIZE - request.param
    assert chunk.begin < BLOCK_SIZE + BLOCK_HEADER_SIZE < chunk.end
    return root


def test_block_header_inside_a_chunk_header(split_record):
    reader = sds_loader.BatchReader(split_record, fields=("x",), targets=("label",))
    indices = [1, 0, 2, 1]
    assert_batch(split_record, reader.read(indices), indices, ("x",), ("label",))


@pytest.fixture(scope="module", params=[0, 1, 20, 39, 40, 41], ids=lambda n: f"{n}B-before")
def split_footer(request, tmp_path_factory) -> str:
    root = write_split_dataset(tmp_path_factory.mktemp("split-footer"), 1, request.param)
    (shard,) = data_shards(root)
    footer = read_chunks(shard)[2]
    assert footer.chunk_type == "r" and footer.num_records == 2  # metadata + one index entry
    assert footer.begin == BLOCK_SIZE - request.param
    assert footer.begin + CHUNK_HEADER_SIZE > BLOCK_SIZE or footer.end > BLOCK_SIZE
    return root


def test_block_header_inside_the_footer(split_footer):
    reader = sds_loader.BatchReader(split_footer, targets=("label",))
    assert_batch(split_footer, reader.read([0, -1, 0]), [0, 0, 0], ("pad", "x"), ("label",))
