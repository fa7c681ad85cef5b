"""Records the native core cannot read are served by signal_dataset, identically.

Transposed shards go through signal_dataset's reader; a caller sees the same
bytes and can tell the path only from `BatchReader.stats`. On a plain dataset,
and on a reference dataset (whose manifests name records of another dataset's
shards by index), once the extension is built, every record must take the
native path (tests/core/test_published_views.py reads views in depth).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import signal_dataset as sds
from native_required import _native  # noqa: F401 - a build without it fails the run (conftest.py)
from sds_factory import assert_batch, capture, field, write_dataset

import sds_loader
from sds_loader import fallback

TRANSPOSED = "group_size:1,transpose:true"


def tagged(ordinal: int) -> sds.Record:
    rng = np.random.default_rng(7000 + ordinal)
    return sds.Record(
        id=f"tagged-{ordinal:04d}",
        fields={
            "iq": field(
                (rng.standard_normal((2, 40)) + 1j * rng.standard_normal((2, 40))).astype(np.complex64)
            ),
            "mask": field(rng.integers(0, 2, size=(5,)).astype(np.bool_)),
        },
        metadata={"label": ordinal % 4, "snr_db": float(rng.uniform(-5, 20)), "flag": ordinal % 2 == 1},
    )


FIELDS = ("iq", "mask")
TARGETS = ("label", "snr_db", "flag")


@pytest.fixture(scope="module", params=[TRANSPOSED, "group_size:4,transpose:true"], ids=["group1", "group4"])
def transposed(request, tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("transposed")
    write_dataset(root, 9, tagged, records_per_shard=4, writer_options=request.param)
    return os.fspath(root)


@pytest.fixture(scope="module")
def half_transposed(tmp_path_factory) -> str:
    """Three shards of 4 records: zstd, transposed, uncompressed."""
    root = tmp_path_factory.mktemp("half-transposed")
    write_dataset(
        root, 12, tagged, records_per_shard=4, writer_options=[None, TRANSPOSED, "group_size:1,uncompressed"]
    )
    return os.fspath(root)


REFERENCE_SELECTION = [7, 2, 9, 0, 5, 2, 11]


@pytest.fixture(scope="module")
def reference_pair(tmp_path_factory) -> tuple[str, str]:
    """(source, reference dataset published from a selection of the source)."""
    source = os.fspath(tmp_path_factory.mktemp("source"))
    write_dataset(source, 12, tagged, records_per_shard=5)
    destination = os.fspath(tmp_path_factory.mktemp("reference") / "published")
    sds.open(source).select(REFERENCE_SELECTION).publish(destination, dataset_id="picked", snapshot_id="v1")
    return source, destination


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("plain")
    write_dataset(root, 10, capture, records_per_shard=4)
    return os.fspath(root)


# -- transposed shards --------------------------------------------------------


def test_transposed_shards_match_signal_dataset(transposed):
    reader = sds_loader.BatchReader(transposed, targets=TARGETS)
    indices = [8, 0, 4, 4, 3, -1, 1, 7]
    batch = reader.read(indices)
    assert_batch(transposed, batch, [i % 9 for i in indices], FIELDS, TARGETS)
    assert reader.stats.fallback_records == len(indices)
    assert reader.stats.native_records == 0


def test_transposed_single_record_and_out(transposed):
    reader = sds_loader.BatchReader(transposed, fields=("iq",), targets=("label",))
    single = reader[5]
    expected = sds.open(transposed)[5]
    assert single["iq"].tobytes() == expected["iq"].data.tobytes()
    assert single["iq"].shape == expected["iq"].data.shape
    assert single["label"] == expected.metadata["label"]

    out = {"iq": np.zeros((3, 2, 40), np.complex64), "label": np.full(3, -1, np.int64)}
    batch = reader.read([2, 6, 2], out=out)
    assert batch["iq"].ctypes.data == out["iq"].ctypes.data
    assert batch["label"].ctypes.data == out["label"].ctypes.data
    assert_batch(transposed, out, [2, 6, 2], ("iq",), ("label",))
    assert reader.stats.fallback_records == 1 + 3


def test_transposed_and_plain_shards_in_one_batch(half_transposed):
    reader = sds_loader.BatchReader(half_transposed, targets=TARGETS)
    # Ordinals 4-7 live in the transposed shard.
    indices = [11, 5, 0, 6, 9, 4, 3, 5, 8, 1]
    batch = reader.read(indices)
    assert_batch(half_transposed, batch, indices, FIELDS, TARGETS)
    transposed_rows = sum(1 for i in indices if 4 <= i < 8)
    assert transposed_rows > 0
    assert reader.stats.fallback_records == transposed_rows
    assert reader.stats.native_records == len(indices) - transposed_rows


def test_batch_of_only_plain_shards_of_a_partly_transposed_dataset(half_transposed):
    reader = sds_loader.BatchReader(half_transposed, fields=("mask",))
    indices = [0, 9, 3, 11]
    assert_batch(half_transposed, reader.read(indices), indices, ("mask",))
    assert reader.stats.native_records == len(indices) and reader.stats.fallback_records == 0


# -- reference datasets ----------------------------------------------------


def test_reference_dataset_is_read_natively(reference_pair):
    source, destination = reference_pair
    reader = sds_loader.BatchReader(destination, targets=TARGETS)
    assert len(reader) == len(REFERENCE_SELECTION)
    indices = [6, 0, 3, 3, -2, 1, 2, 4]
    positions = [i % len(REFERENCE_SELECTION) for i in indices]
    batch = reader.read(indices)
    assert_batch(destination, batch, positions, FIELDS, TARGETS)
    # ... which is the selected records of the source.
    original = sds.open(source)
    for row, position in enumerate(positions):
        expected = original[REFERENCE_SELECTION[position]]
        assert batch["iq"][row].tobytes() == expected["iq"].data.tobytes()
        assert batch["label"][row] == expected.metadata["label"]
    assert reader.stats.native_records == len(indices)
    assert reader.stats.fallback_records == 0


def test_reference_dataset_single_record(reference_pair):
    _, destination = reference_pair
    reader = sds_loader.BatchReader(destination, fields=("mask",))
    for index in (0, 5, -1):
        got = reader[index]
        expected = sds.open(destination)[index]["mask"].data
        assert got["mask"].dtype == expected.dtype
        assert got["mask"].tobytes() == expected.tobytes()
    assert reader.stats.native_records == 3 and reader.stats.fallback_records == 0


# -- plain datasets stay native --------------------------------------------


@pytest.mark.parametrize("threads", [1, 3])
def test_plain_dataset_is_read_natively(plain, threads):
    reader = sds_loader.BatchReader(plain, targets=("label", "snr_db"), threads=threads)
    indices = [9, 0, 4, 4, 7, 2, -1]
    batch = reader.read(indices)
    assert_batch(plain, batch, [i % 10 for i in indices], ("samples",), ("label", "snr_db"))
    assert reader[3]["samples"].tobytes() == sds.open(plain)[3]["samples"].data.tobytes()
    assert reader.stats.native_records == len(indices) + 1
    assert reader.stats.fallback_records == 0


def test_plain_dataset_has_no_reason_to_fall_back(plain):
    reader = sds_loader.BatchReader(plain)
    assert reader.native_unavailable_reason is None


def test_stats_count_every_row(plain):
    reader = sds_loader.BatchReader(plain)
    reader.read([1, 2, 2])
    reader.read([0])
    assert reader[5]["samples"].tobytes() == sds.open(plain)[5]["samples"].data.tobytes()
    assert reader.stats.native_records == 5 and reader.stats.fallback_records == 0


# -- damaged shards the fallback serves ----------------------------------------


def _damaged_transposed(tmp_path, damage) -> tuple[str, str]:
    from sds_factory import data_shards

    root = os.fspath(tmp_path / "dataset")
    write_dataset(root, 4, tagged, writer_options=TRANSPOSED)
    (shard,) = data_shards(root)
    damage(shard)
    return root, shard


def _flip_in_second_record_chunk(shard: str) -> None:
    from sds_factory import read_chunks

    chunk = [c for c in read_chunks(shard) if c.chunk_type == "t"][1]
    with open(shard, "r+b") as file:
        position = chunk.physical(40 + chunk.data_size // 2)
        file.seek(position)
        byte = file.read(1)[0]
        file.seek(position)
        file.write(bytes([byte ^ 4]))


def _descriptor_without_tensor(shard: str) -> None:
    from shard_surgery import read_payloads, with_descriptor, write_payloads

    payloads = read_payloads(shard)
    payloads[1] = with_descriptor(payloads[1], lambda d: {**d, "fields": {k: {} for k in d["fields"]}})
    write_payloads(shard, payloads, TRANSPOSED)


@pytest.mark.parametrize(
    "damage",
    [_flip_in_second_record_chunk, _descriptor_without_tensor],
    ids=["hash-mismatch", "malformed-descriptor"],
)
def test_damaged_shard_served_by_the_fallback_raises_typed(tmp_path, damage):
    root, shard = _damaged_transposed(tmp_path, damage)
    reader = sds_loader.BatchReader(root, fields=("iq",))
    with pytest.raises(sds_loader.CorruptShardError) as raised:
        reader.read([0, 1, 2])
    message = str(raised.value)
    assert os.path.basename(shard) in message and "record 1 " in message, message
    assert isinstance(raised.value, sds.CorruptDatasetError)
    with pytest.raises(sds_loader.CorruptShardError, match="record 1 "):
        reader[1]
    # The undamaged records still read, through the same fallback.
    assert_batch(root, reader.read([3, 0, 2]), [3, 0, 2], ["iq"])
    assert reader.stats.native_records == 0 and reader.stats.fallback_records == 3


def _header_damage(field: str, delta: int):
    """A transposed record chunk's header field changed, its hashes made to match: array_record's
    refusal then names neither Riegeli nor DATA_LOSS ("Too few records", say)."""

    def damage(shard: str) -> None:
        from sds_factory import read_chunks
        from shard_surgery import ChunkHeader, ShardImage

        image = ShardImage(shard)
        chunk = [c for c in read_chunks(shard) if c.chunk_type == "t"][1]
        header, payload = image.chunk(chunk)
        image.replace(
            chunk, ChunkHeader(**{**header.__dict__, field: getattr(header, field) + delta}), payload
        )
        image.save()

    damage.__name__ = f"{field}{delta:+d}"
    return damage


@pytest.mark.parametrize(
    "damage",
    [_header_damage("num_records", 1), _header_damage("decoded_data_size", 1)],
    ids=["num_records+1", "decoded_data_size+1"],
)
def test_damage_is_told_by_exception_type_not_message(tmp_path, damage):
    root, shard = _damaged_transposed(tmp_path, damage)
    with pytest.raises(RuntimeError) as refused:
        sds.open(root).__getitems__([0, 1, 2])
    # array_record's own words for it are none of those the fallback once looked for.
    assert not any(
        word in str(refused.value) for word in ("Corrupted Riegeli", "Invalid Riegeli", "DATA_LOSS")
    )
    reader = sds_loader.BatchReader(root, fields=("iq",))
    with pytest.raises(sds_loader.CorruptShardError, match="record 1 ") as raised:
        reader.read([0, 1, 2])
    assert os.path.basename(shard) in str(raised.value)
    assert_batch(root, reader.read([0, 2, 3]), [0, 2, 3], ["iq"])


def test_verify_checksums_off_is_said_not_to_reach_signal_dataset(tmp_path):
    root, shard = _damaged_transposed(tmp_path, _flip_in_second_record_chunk)
    reader = sds_loader.BatchReader(root, fields=("iq",), verify_checksums=False, max_open_files=3)
    with pytest.raises(sds_loader.CorruptShardError, match="verify_checksums=False does not reach"):
        reader.read([1])
    # The reader's settings reach the fallback, and the one it can honour is honoured.
    settings = reader.process_state().fallback._settings
    assert settings == fallback.ReadSettings(verify_checksums=False, max_open_files=3)
    assert fallback.open_dataset(root, None, settings).storage_options.max_open_shards == 3


def test_an_unreadable_shard_is_a_storage_error_not_damage(tmp_path):
    root, shard = _damaged_transposed(tmp_path, lambda shard: None)
    store = fallback._TypedShardStore()
    classified = store._classified(shard + ".missing", None, RuntimeError("could not open"))
    assert isinstance(classified, FileNotFoundError)
    assert isinstance(store._classified(shard, None, RuntimeError("refused")), fallback.ShardRefused)


# -- targets: the same values, the same errors, on either path ------------------

#: Metadata values at and past int64's edges, each read as an int64 target.
EDGE_VALUES = [2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 1e19, 9.21e18, 9.1e18, 2.5, True]


def edge_record(ordinal: int) -> sds.Record:
    value = 1 if ordinal % len(EDGE_VALUES) == 0 else EDGE_VALUES[ordinal % len(EDGE_VALUES)]
    return sds.Record(
        id=f"edge-{ordinal}",
        fields={"x": field(np.arange(3, dtype=np.int32))},
        metadata={"v": value},
    )


def test_target_edge_values_agree_between_the_paths(tmp_path):
    """A plain shard (native) and a transposed one (signal_dataset) hold the
    same metadata: each value reads the same, or raises the same type."""
    count = len(EDGE_VALUES)
    root = os.fspath(tmp_path / "edges")
    write_dataset(root, 2 * count, edge_record, records_per_shard=count, writer_options=[None, TRANSPOSED])
    reader = sds_loader.BatchReader(root, targets=("v",))

    def outcome(ordinal: int):
        try:
            return reader.read([ordinal - ordinal % count, ordinal])["v"].tolist()
        except Exception as exc:  # noqa: BLE001 - the type is what is compared
            return type(exc)

    for k in range(1, count):
        native, served = outcome(k), outcome(count + k)
        assert native == served, (EDGE_VALUES[k], native, served)
        assert native is sds_loader.TargetError or isinstance(native, list), (EDGE_VALUES[k], native)
    assert reader.stats.native_records > 0 and reader.stats.fallback_records > 0
    assert outcome(1) is sds_loader.TargetError is outcome(count + 1)  # 2**63: no OverflowError


def test_float_targets_refuse_an_integer_past_float64(tmp_path):
    assert fallback.target_value("v", "f", 2**70, 3) == float(2**70)
    with pytest.raises(sds_loader.TargetError, match="too large for float64"):
        fallback.target_value("v", "f", 10**400, 3)
    with pytest.raises(sds_loader.TargetError, match="does not fit in int64"):
        fallback.target_value("v", "i", 2**63, 3)
