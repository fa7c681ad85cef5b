"""Windows: every row is signal_dataset's array sliced along the window's axis and
zero-padded, byte for byte, whatever the shard layout; and every misuse raises.

Records vary in length along ``time``, which sits last, first or in the middle
of fields of rank 1 to 3; one field has no ``time`` axis and is read whole.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import signal_dataset as sds
from sds_factory import WRITER_OPTIONS, write_dataset
from varied_records import COUNT, record_length, varied

import sds_loader
from sds_loader import Window

TRANSPOSED = "group_size:1,transpose:true"
#: field -> position of the time axis (None: the field has none)
TIME_AXIS = {"wave": 0, "iq": 1, "cube": 1, "first": 0, "static": None}


def expected_window(data: np.ndarray, axis: int | None, start: int, length: int) -> tuple[np.ndarray, int]:
    """signal_dataset's array, sliced to the window and zero-padded to its length."""
    if axis is None:
        return data, -1
    valid = max(0, min(length, data.shape[axis] - start))
    index = [slice(None)] * data.ndim
    index[axis] = slice(start, start + valid)
    shape = list(data.shape)
    shape[axis] = length
    out = np.zeros(shape, dtype=data.dtype)
    target = [slice(None)] * data.ndim
    target[axis] = slice(0, valid)
    out[tuple(target)] = data[tuple(index)]
    return out, valid


def assert_windows(root, batch, indices, starts, length, fields=tuple(TIME_AXIS), pad=True) -> None:
    reference = sds.open(os.fspath(root))
    for row, (index, start) in enumerate(zip(indices, starts, strict=True)):
        record = reference[index]
        for name in fields:
            expected, valid = expected_window(record[name].data, TIME_AXIS[name], start, length)
            got = batch[name][row]
            assert got.dtype == expected.dtype, (name, got.dtype)
            assert got.shape == expected.shape, (index, name, got.shape, expected.shape)
            assert got.tobytes() == expected.tobytes(), (index, start, name)
            if TIME_AXIS[name] is not None and pad:
                assert batch[f"{name}_length"][row] == valid, (index, start, name)


@pytest.fixture(scope="module", params=[*WRITER_OPTIONS, TRANSPOSED], ids=lambda o: o or "default")
def layouts(request, tmp_path_factory) -> str:
    """The varied records in shards of 4, 4 and 3, written with one writer option."""
    root = tmp_path_factory.mktemp("windows")
    write_dataset(root, COUNT, varied, records_per_shard=4, writer_options=request.param)
    return os.fspath(root)


@pytest.fixture(scope="module")
def default(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("windows-default")
    write_dataset(root, COUNT, varied, records_per_shard=4)
    return os.fspath(root)


@pytest.fixture(scope="module")
def uncompressed(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("windows-uncompressed")
    write_dataset(root, COUNT, varied, records_per_shard=4, writer_options="group_size:1,uncompressed")
    return os.fspath(root)


def test_padded_windows_match_signal_dataset(layouts, request):
    reader = sds_loader.BatchReader(layouts, window=Window("time", 16, pad=True))
    # Repeats with the same start and with other starts, records shorter than
    # the window, windows ending exactly at a record's end and running past it.
    indices = [7, 0, 3, 3, 3, 10, 1, 7, 0, 5, 2]
    starts = [10, 0, 20, 20, 31, 79, 13, 60, 4, 0, 22]
    batch = reader.read(indices, starts=starts)
    assert set(batch) == {*TIME_AXIS, *(f"{n}_length" for n, a in TIME_AXIS.items() if a is not None)}
    assert_windows(layouts, batch, indices, starts, 16)
    if request.node.callspec.params["layouts"] != TRANSPOSED:
        assert reader.stats.fallback_records == 0


def test_unpadded_windows_that_fit(layouts):
    reader = sds_loader.BatchReader(layouts, fields=("cube", "wave", "static"), window=Window("time", 8))
    indices = [4, 9, 1, 9, 6]
    starts = [record_length(i) - 8 - k for k, i in enumerate(indices)]
    batch = reader.read(indices, starts=starts)
    assert set(batch) == {"cube", "wave", "static"}
    assert_windows(layouts, batch, indices, starts, 8, ("cube", "wave", "static"), pad=False)


def test_window_to_the_longest_record_of_each_batch(layouts):
    reader = sds_loader.BatchReader(layouts, fields=("iq", "first"), window=Window("time", None, pad=True))
    for indices, starts in (([2, 5, 0], [0, 3, 4]), ([10, 10, 1], [0, 50, 0])):
        batch = reader.read(indices, starts=starts)
        longest = max(record_length(i) - s for i, s in zip(indices, starts, strict=True))
        assert batch["iq"].shape == (3, 2, longest)
        assert batch["first"].shape == (3, longest, 4)
        assert_windows(layouts, batch, indices, starts, longest, ("iq", "first"))


def test_starts_default_to_zero_and_crop_center(default):
    start = sds_loader.BatchReader(default, fields=("wave",), window=Window("time", 4))
    assert_windows(default, start.read([3, 8]), [3, 8], [0, 0], 4, ("wave",), pad=False)
    center = sds_loader.BatchReader(
        default, fields=("wave",), window=Window("time", 6, pad=True, crop="center")
    )
    indices = [0, 3, 8]  # lengths 5, 32, 77
    starts = [0, 13, 35]
    assert center.window_starts(indices).tolist() == starts
    assert_windows(default, center.read(indices), indices, starts, 6, ("wave",))


def test_random_crop_depends_on_seed_epoch_and_ordinal_only(default):
    reader = sds_loader.BatchReader(default, window=Window("time", 8, pad=True, crop="random"))
    indices = list(range(COUNT))
    first = reader.window_starts(indices, seed=3, epoch=1)
    assert reader.window_starts(indices[::-1], seed=3, epoch=1).tolist() == first.tolist()[::-1]
    assert reader.window_starts(indices, seed=3, epoch=2).tolist() != first.tolist()
    assert reader.window_starts(indices, seed=4, epoch=1).tolist() != first.tolist()
    for ordinal, start in zip(indices, first.tolist(), strict=True):
        assert 0 <= start <= max(record_length(ordinal) - 8, 0)
    again = sds_loader.BatchReader(default, window=Window("time", 8, pad=True, crop="random"))
    assert again.window_starts(indices, seed=3, epoch=1).tolist() == first.tolist()


def test_out_with_windows(default):
    reader = sds_loader.BatchReader(
        default, fields=("cube", "static"), targets=("label",), window=Window("time", 12, pad=True)
    )
    indices, starts = [9, 0, 9], [70, 2, 0]
    out = {
        "cube": np.full((3, 2, 12, 3), 7, dtype=np.int16),
        "static": np.empty((3, 5)),
        "cube_length": np.full(3, -1, dtype=np.int64),
        "label": np.empty(3, dtype=np.int64),
    }
    batch = reader.read(indices, out=out, starts=starts)
    for name, array in out.items():
        assert np.shares_memory(batch[name], array), name
    assert_windows(default, batch, indices, starts, 12, ("cube", "static"))
    assert batch["label"].tolist() == [0, 0, 0]
    wrong = dict(out, cube=np.empty((3, 2, 11, 3), dtype=np.int16))
    with pytest.raises(
        ValueError, match=r"out\['cube'\] has shape \(3, 2, 11, 3\); this batch needs \(3, 2, 12, 3\)"
    ):
        reader.read(indices, out=wrong, starts=starts)
    without_lengths = {k: v for k, v in out.items() if k != "cube_length"}
    with pytest.raises(ValueError, match="missing \\['cube_length'\\]"):
        reader.read(indices, out=without_lengths, starts=starts)


def test_single_record_through_getitem(default):
    reader = sds_loader.BatchReader(
        default, fields=("iq",), window=Window("time", 10, pad=True, crop="center")
    )
    item = reader[6]  # length 59: centre start 24
    assert item["iq"].shape == (2, 10)
    assert item["iq"].tobytes() == sds.open(default)[6]["iq"].data[:, 24:34].tobytes()
    assert item["iq_length"] == 10


def test_other_axes_must_still_agree(tmp_path):
    def uneven(ordinal: int) -> sds.Record:
        channels = 1 + ordinal % 2
        data = np.zeros((channels, 20 + ordinal), dtype=np.float32)
        axes = (sds.Axis("channel", channels), sds.Axis("time", 20 + ordinal))
        return sds.Record(id=f"u{ordinal}", fields={"iq": sds.Field(data, axes=axes)})

    write_dataset(tmp_path, 4, uneven)
    reader = sds_loader.BatchReader(tmp_path, window=Window("time", 8))
    assert reader.read([0, 2], starts=[1, 5])["iq"].shape == (2, 1, 8)
    with pytest.raises(sds_loader.MixedShapesError, match="iq"):
        reader.read([0, 1])


# -- errors -------------------------------------------------------------------


@pytest.fixture(scope="module", params=["default", "uncompressed", "transposed"])
def any_path(request, default, uncompressed, tmp_path_factory) -> str:
    if request.param == "default":
        return default
    if request.param == "uncompressed":
        return uncompressed
    root = tmp_path_factory.mktemp("windows-transposed")
    write_dataset(root, COUNT, varied, records_per_shard=4, writer_options=TRANSPOSED)
    return os.fspath(root)


@pytest.mark.parametrize("length", [8, None])
def test_start_past_the_record_names_ordinal_start_and_length(any_path, length):
    reader = sds_loader.BatchReader(any_path, fields=("wave",), window=Window("time", length, pad=True))
    with pytest.raises(IndexError, match=r"record 2\b.*start 23\b.*\b23 positions"):
        reader.read([1, 2], starts=[0, 23])
    with pytest.raises(IndexError, match=r"record 1\b.*start 40\b.*\b14 positions"):
        reader.read([1], starts=[40])


def test_negative_start_names_ordinal_start_and_length(any_path):
    reader = sds_loader.BatchReader(any_path, fields=("iq",), window=Window("time", 4))
    with pytest.raises(IndexError, match=r"record 3\b.*start -1\b.*\b32 positions"):
        reader.read([0, 3], starts=[0, -1])


def test_unpadded_window_past_the_end(any_path):
    reader = sds_loader.BatchReader(any_path, fields=("cube",), window=Window("time", 10))
    with pytest.raises(IndexError, match=r"record 0\b.*start 0\b.*\b5 positions.*pad=True"):
        reader.read([0])
    with pytest.raises(IndexError, match=r"record 4\b.*start 32\b.*\b41 positions.*at most 31"):
        reader.read([5, 4], starts=[0, 32])


def test_axis_no_selected_field_has(default):
    with pytest.raises(ValueError, match=r"'frequency'.*'iq': \('channel', 'time'\)") as caught:
        sds_loader.BatchReader(default, fields=("iq", "static"), window=Window("frequency", 4))
    assert "'static': ('coefficient',)" in str(caught.value)
    with pytest.raises(ValueError, match="'time'.*'static'"):
        sds_loader.BatchReader(default, fields=("static",), window=Window("time", 4))


def test_starts_of_the_wrong_length_or_type(default):
    reader = sds_loader.BatchReader(default, fields=("wave",), window=Window("time", 4))
    with pytest.raises(ValueError, match="starts has 1 entries for 2 indices"):
        reader.read([0, 1], starts=[0])
    with pytest.raises(TypeError, match="starts must be integers; got float"):
        reader.read([0], starts=[1.0])
    with pytest.raises(TypeError, match="starts must be integers; got an array of float64"):
        reader.read([0], starts=np.zeros(1))
    with pytest.raises(TypeError, match="starts must be a sequence of integers, not int"):
        reader.read([0], starts=3)
    with pytest.raises(TypeError, match="got bool"):
        reader.read([0], starts=[True])
    plain = sds_loader.BatchReader(default, fields=("wave",))
    with pytest.raises(ValueError, match="this reader has none"):
        plain.read([0], starts=[0])


def test_window_arguments():
    with pytest.raises(ValueError, match="pass pad=True"):
        Window("time", None)
    with pytest.raises(ValueError, match="at least 1"):
        Window("time", 0)
    with pytest.raises(TypeError, match="positive integer or None"):
        Window("time", 4.0)
    with pytest.raises(TypeError, match="axis name"):
        Window("", 4)
    with pytest.raises(ValueError, match="crop must be one of"):
        Window("time", 4, crop="middle")


# -- boundaries: a padded batch takes one of a few lengths ------------------------------


def test_boundaries_pad_each_batch_to_its_smallest_boundary(layouts):
    window = Window("time", None, pad=True, boundaries=(16, 32, 64))
    reader = sds_loader.BatchReader(layouts, window=window)
    cases = [
        ([0, 1], [0, 0], 16),  # 5 and 14 positions
        ([2, 3, 0], [0, 0, 0], 32),  # 23 and 32: a record exactly on a boundary keeps it
        ([1, 4], [0, 0], 64),  # 14 and 41
        ([2, 8], [0, 70], 32),  # 23, and 77 - 70: the positions from each start count
        ([9, 10, 0], [0, 0, 0], 64),  # 86 and 95 are past the largest: cut to it
        ([10, 7], [40, 5], 64),  # 55 and 63 from their starts
    ]
    for indices, starts, boundary in cases:
        batch = reader.read(indices, starts=starts)
        assert batch["wave"].shape[0] == len(indices) and batch["wave"].shape[-1] == boundary, indices
        assert_windows(layouts, batch, indices, starts, boundary)


def test_a_cut_past_the_largest_boundary_follows_the_crop(default):
    lengths = {10: 95, 9: 86, 2: 23}
    indices = list(lengths)
    center = sds_loader.BatchReader(
        default,
        fields=("wave", "cube"),
        window=Window("time", None, pad=True, crop="center", boundaries=(32, 64)),
    )
    starts = [(95 - 64) // 2, (86 - 64) // 2, 0]
    assert center.window_starts(indices).tolist() == starts
    assert_windows(default, center.read(indices), indices, starts, 64, ("wave", "cube"))
    # Random cuts are placed as a fixed window of the largest boundary's length would be.
    random = sds_loader.BatchReader(
        default, fields=("wave",), window=Window("time", None, pad=True, crop="random", boundaries=(32, 64))
    )
    fixed = sds_loader.BatchReader(
        default, fields=("wave",), window=Window("time", 64, pad=True, crop="random")
    )
    for seed, epoch in ((0, 0), (3, 5)):
        picked = random.window_starts(indices, seed=seed, epoch=epoch)
        assert picked.tolist() == fixed.window_starts(indices, seed=seed, epoch=epoch).tolist()
        assert picked[2] == 0 and 0 <= picked[0] <= 95 - 64
        assert_windows(default, random.read(indices, starts=picked), indices, picked.tolist(), 64, ("wave",))
    # Starting at 0, the cut keeps the first positions.
    start = sds_loader.BatchReader(
        default, fields=("wave",), window=Window("time", None, pad=True, boundaries=(64,))
    )
    batch = start.read([10])
    assert batch["wave_length"].tolist() == [64]
    assert_windows(default, batch, [10], [0], 64, ("wave",))


def test_boundaries_that_refuse_to_cut_name_the_record(any_path):
    refuse = sds_loader.Boundaries((16, 32, 64), overflow="refuse")
    reader = sds_loader.BatchReader(
        any_path, fields=("iq",), window=Window("time", None, pad=True, boundaries=refuse)
    )
    assert reader.read([0, 6])["iq"].shape == (2, 2, 64)  # 59 positions fit
    with pytest.raises(
        ValueError, match=r"record 9 holds 86 positions along axis 'time', more than the largest boundary, 64"
    ):
        reader.read([0, 9])
    with pytest.raises(
        ValueError,
        match=r"2 records hold more positions along axis 'time' than the largest boundary, 64, .* refuses to "
        r"cut them: record 9 holds 86, record 10 holds 95; add a larger boundary \(the longest holds 95\)",
    ):
        reader.read([0, 9, 10])
    assert reader.read([9], starts=[30])["iq"].shape == (1, 2, 64)  # 56 positions from its start


def test_boundaries_arguments():
    from sds_loader import Boundaries

    assert Boundaries.powers_of_two(256, 2048) == Boundaries((256, 512, 1024, 2048))
    assert Boundaries.powers_of_two(8, 8).lengths == (8,)
    assert Window("time", None, pad=True, boundaries=[4, 8]).boundaries == Boundaries((4, 8))
    bounds = Boundaries((4, 8, 16))
    assert bounds.buckets(np.asarray([1, 4, 5, 8, 9, 16, 17, 99])).tolist() == [0, 0, 1, 1, 2, 2, 2, 2]
    # Records of 2, 8 and 20 positions padded (cut) to 4, 8 and 16: 2 + 8 + 16 valid of 28.
    assert bounds.implied_waste(np.asarray([2, 8, 20])) == pytest.approx(1 - 26 / 28)
    with pytest.raises(ValueError, match="increase strictly"):
        Boundaries((8, 8))
    with pytest.raises(ValueError, match="at least one length"):
        Boundaries(())
    with pytest.raises(ValueError, match="positive integers"):
        Boundaries((0, 4))
    with pytest.raises(ValueError, match="positive integers"):
        Boundaries((True, 4))
    with pytest.raises(TypeError, match="sequence of lengths, not int"):
        Boundaries(4)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="overflow must be one of"):
        Boundaries((4,), overflow="drop")
    with pytest.raises(ValueError, match="must be a power of two, not 300"):
        Boundaries.powers_of_two(300, 2048)
    with pytest.raises(ValueError, match="smallest <= largest"):
        Boundaries.powers_of_two(512, 256)
    with pytest.raises(ValueError, match="has both a fixed length and boundaries"):
        Window("time", 16, pad=True, boundaries=(16, 32))
    with pytest.raises(ValueError, match="pass pad=True"):
        Window("time", None, boundaries=(16, 32))
    with pytest.raises(TypeError, match="Window boundaries must be a sds_loader.Boundaries or a sequence"):
        Window("time", None, pad=True, boundaries="16")


def test_window_must_be_a_window(default):
    with pytest.raises(TypeError, match="window must be a sds_loader.Window, not tuple"):
        sds_loader.BatchReader(default, window=("time", 4))


def test_length_name_clash(tmp_path):
    def clashing(ordinal: int) -> sds.Record:
        time = sds.Axis("time", 8)
        return sds.Record(
            id=f"c{ordinal}",
            fields={
                "x": sds.Field(np.zeros(8, np.float32), axes=(time,)),
                "x_length": sds.Field(np.zeros(1, np.int64), axes=(sds.Axis("one", 1),)),
            },
        )

    write_dataset(tmp_path, 2, clashing)
    with pytest.raises(ValueError, match="'x_length' beside field 'x'"):
        sds_loader.BatchReader(tmp_path, window=Window("time", 4, pad=True)).read([0])
    unpadded = sds_loader.BatchReader(tmp_path, window=Window("time", 4)).read([0, 1])
    assert unpadded["x"].shape == (2, 4) and unpadded["x_length"].shape == (2, 1)


# -- reading only the window ----------------------------------------------------


def test_unverified_and_second_reads_match(layouts):
    """Uncompressed shards read only the window without verification, and once a
    chunk has been verified; every other layout reads whole. Same bytes either way."""
    indices = [10, 3, 3, 6, 0, 9]
    starts = [90, 0, 17, 40, 4, 50]
    for verify in (False, True):
        reader = sds_loader.BatchReader(layouts, verify_checksums=verify, window=Window("time", 12, pad=True))
        for _ in range(2):
            assert_windows(layouts, reader.read(indices, starts=starts), indices, starts, 12)


def long_capture(ordinal: int) -> sds.Record:
    n = 40_000 + 5_000 * ordinal  # 320 to 520 KB a record: windows cross block headers
    rng = np.random.default_rng(ordinal)
    data = rng.standard_normal((2, n), dtype=np.float32).view(np.complex64)
    axes = (sds.Axis("channel", 2), sds.Axis("time", n // 2))
    return sds.Record(id=f"long{ordinal}", fields={"iq": sds.Field(data, axes=axes)})


@pytest.fixture(scope="module")
def long_uncompressed(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("windows-long")
    write_dataset(root, 5, long_capture, writer_options="group_size:1,uncompressed")
    return os.fspath(root)


@pytest.mark.parametrize("verify", [False, True])
def test_windows_across_block_headers(long_uncompressed, verify):
    reader = sds_loader.BatchReader(
        long_uncompressed, verify_checksums=verify, window=Window("time", 9000, pad=True)
    )
    reference = sds.open(long_uncompressed)
    indices = [4, 0, 2, 2, 1, 3]
    starts = [0, 8191, 12000, 16000, 15000, 1]
    for _ in range(2):
        batch = reader.read(indices, starts=starts)
        for row, (index, start) in enumerate(zip(indices, starts, strict=True)):
            expected, valid = expected_window(reference[index]["iq"].data, 1, start, 9000)
            assert batch["iq"][row].tobytes() == expected.tobytes(), (index, start)
            assert batch["iq_length"][row] == valid


def test_a_verified_chunk_rewritten_in_place_is_verified_again_under_a_window(long_uncompressed, tmp_path):
    """After a chunk has been verified whole, a window reads only its own bytes
    while the file stays the same. Damage written into the file elsewhere in the
    chunk, even with its modification time put back, changes the file's change
    time: the reader verifies the chunk again and refuses it, as a reader that
    had not verified it does."""
    import shutil

    from sds_factory import data_shards, record_chunks

    root = tmp_path / "copy"
    shutil.copytree(long_uncompressed, root)
    reader = sds_loader.BatchReader(root, window=Window("time", 100))
    before = reader.read([0], starts=[500])["iq"].copy()
    assert reader.read([0], starts=[500])["iq"].tobytes() == before.tobytes()
    (shard,) = data_shards(root)
    chunk = record_chunks(shard)[0]
    identity = os.stat(shard)
    with open(shard, "r+b") as file:  # a byte near the chunk's end, far from the window
        file.seek(chunk.physical(chunk.data_size - 1000))
        byte = file.read(1)
        file.seek(chunk.physical(chunk.data_size - 1000))
        file.write(bytes([byte[0] ^ 0xFF]))
    os.utime(shard, ns=(identity.st_atime_ns, identity.st_mtime_ns))
    with pytest.raises(sds_loader.CorruptShardError, match="hash"):
        reader.read([0], starts=[500])
    with pytest.raises(sds_loader.CorruptShardError, match="hash"):
        sds_loader.BatchReader(root, window=Window("time", 100)).read([0], starts=[500])


def test_through_a_gathering_source_only_windows_are_fetched(tmp_path):
    """Through a source that gathers many runs per fetch (as object stores do),
    the uncompressed shard's windows fetch a few kilobytes a record while the
    zstd shard's runs, fetched in the same calls, come whole."""
    from file_range_source import FileRangeSource

    from sds_loader import _native
    from sds_loader.dataset import shard_table

    write_dataset(
        tmp_path, 6, long_capture, records_per_shard=3, writer_options=["group_size:1,uncompressed", None]
    )
    table = shard_table(sds.open(os.fspath(tmp_path)))
    source = FileRangeSource(list(table.paths))
    native = _native.ShardSet(list(table.paths), False, 8, source=source)
    reference = sds.open(os.fspath(tmp_path))
    layout = _native.BatchLayout()
    layout.add_field("iq", "tensor_000000", "C64", (2, 500), window_axis=1)

    def read(ordinals: list[int], starts: list[int]) -> np.ndarray:
        wanted = np.asarray(ordinals, dtype=np.int64)
        files, shard_records = table.locate(wanted)
        iq = np.empty((len(ordinals), 2, 500), dtype=np.complex64)
        fallback = native.read(
            files,
            shard_records,
            wanted,
            layout,
            {"iq": iq},
            2,
            np.asarray(starts, dtype=np.int64),
            False,
        )
        assert not fallback.any()
        for row, (ordinal, start) in enumerate(zip(ordinals, starts, strict=True)):
            assert iq[row].tobytes() == reference[ordinal]["iq"].data[:, start : start + 500].tobytes()
        return iq

    read([0, 3], [0, 0])  # footers
    source.calls.clear()
    read([2, 0, 1, 4, 5, 3], [19000, 7, 12345, 100, 20000, 65])
    uncompressed_bytes = sum(size for call in source.calls for f, _, size in call if f == 0)
    zstd_bytes = sum(size for call in source.calls for f, _, size in call if f == 1)
    record_bytes = sum(reference[o]["iq"].data.nbytes for o in range(3))
    assert uncompressed_bytes < record_bytes / 20, (uncompressed_bytes, record_bytes)
    assert zstd_bytes > 0.8 * sum(reference[o]["iq"].data.nbytes for o in range(3, 6))
