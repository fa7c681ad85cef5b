"""Annotation sets read with each batch, against signal_dataset's own AnnotationSet.

Every row is compared byte for byte with ``signal_dataset.open(root)
.annotations["bursts"][ordinal]``: successes with 0 to 5 events, skipped and
failed rows (which carry tensors a reader must not return), and rows stored
without fields (the ``__empty__`` placeholder).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import signal_dataset as sds
from annotation_factory import COUNT, record_length, write_annotated

import sds_loader
from sds_loader import Annotations, BatchReader, Window

STATUS = {"success": 0, "skipped": 1, "failed": 2}
FIELDS = ("intervals", "freq")
#: Shuffled, repeated, negative: every row of the set at least once.
ORDER = [7, 0, 22, 3, 3, 5, 11, -1, 4, 9, 1, 2, 6, 8, 10, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21]


@pytest.fixture(scope="module")
def annotated(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = str(tmp_path_factory.mktemp("annotated") / "captures.sds")
    write_annotated(root)
    return root


@pytest.fixture(scope="module")
def reference(annotated: str) -> sds.AnnotationSet:
    return sds.open(annotated).annotations["bursts"]


def expected_items(reference: Any, ordinal: int, name: str) -> np.ndarray | None:
    """The row's items as signal_dataset returns them, or None when it returns none."""
    record = reference[ordinal]
    if record.status.value != "success" or name not in record.fields:
        return None
    data: np.ndarray = record.fields[name].data
    return data


def normalized(indices: list[int]) -> list[int]:
    return [i % COUNT for i in indices]


def test_ragged_rows_match_signal_dataset_byte_for_byte(annotated: str, reference: Any) -> None:
    # The captures differ in length: a window batches them (positions= is not given, so no clip).
    reader = BatchReader(
        annotated, fields=("samples",), window=Window("time", 10), annotations=[Annotations("bursts", FIELDS)]
    )
    batch = reader.read(ORDER, starts=[0] * len(ORDER))
    offsets = batch["bursts.offsets"]
    assert offsets.dtype == np.int64 and offsets.shape == (len(ORDER) + 1,) and offsets[0] == 0
    seen_kinds = set()
    for k, ordinal in enumerate(normalized(ORDER)):
        record = reference[ordinal]
        assert batch["bursts.status"][k] == STATUS[record.status.value]
        for name in FIELDS:
            got = batch[f"bursts.{name}"][offsets[k] : offsets[k + 1]]
            want = expected_items(reference, ordinal, name)
            if want is None:
                assert got.shape[0] == 0
                seen_kinds.add("empty-" + record.status.value)
            else:
                assert got.dtype == want.dtype and got.shape == want.shape
                assert got.tobytes() == want.tobytes()
                seen_kinds.add("items" if want.shape[0] else "zero-events")
    assert batch["bursts.status"].dtype == np.uint8
    assert batch["bursts.intervals"].dtype == np.int64 and batch["bursts.freq"].dtype == np.float32
    # The set covers every state a row can be in, so each comparison above ran.
    assert {"items", "zero-events", "empty-success", "empty-skipped", "empty-failed"} <= seen_kinds


@pytest.fixture(scope="module")
def uniform(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Captures of one length (a batch without a window), with the same annotation rows."""
    import annotation_factory

    root = str(tmp_path_factory.mktemp("uniform") / "captures.sds")
    original = annotation_factory.record_length
    annotation_factory.record_length = lambda ordinal: 500
    try:
        write_annotated(root)
    finally:
        annotation_factory.record_length = original
    return root


def test_rows_come_with_the_records_they_annotate(uniform: str) -> None:
    reference = sds.open(uniform)
    reader = BatchReader(uniform, annotations=[Annotations("bursts", FIELDS)], extras=("ordinal", "id"))
    batch = reader.read(ORDER)
    assert batch["samples"].shape == (len(ORDER), 500)
    ordinals = normalized(ORDER)
    assert batch["ordinal"].tolist() == ordinals and batch["ordinal"].dtype == np.int64
    assert list(batch["id"]) == [reference.record_metadata[i].id for i in ordinals]
    for k, ordinal in enumerate(ordinals):
        assert batch["samples"][k].tobytes() == reference[ordinal]["samples"].data.tobytes()
        offsets = batch["bursts.offsets"]
        want = expected_items(reference.annotations["bursts"], ordinal, "intervals")
        got = batch["bursts.intervals"][offsets[k] : offsets[k + 1]]
        assert got.tobytes() == (b"" if want is None else want.tobytes())


def test_padded_rows_hold_the_items_then_pad_value(annotated: str, reference: Any) -> None:
    reader = BatchReader(
        annotated,
        fields=("samples",),
        window=Window("time", 100),
        annotations=[Annotations("bursts", FIELDS, max_items=5, pad_value=-7)],
    )
    batch = reader.read(ORDER, starts=[0] * len(ORDER))
    assert "bursts.offsets" not in batch
    assert batch["bursts.intervals"].shape == (len(ORDER), 5, 2)
    assert batch["bursts.freq"].shape == (len(ORDER), 5, 2) and batch["bursts.freq"].dtype == np.float32
    count = batch["bursts.count"]
    assert count.dtype == np.int64
    for k, ordinal in enumerate(normalized(ORDER)):
        for name in FIELDS:
            want = expected_items(reference, ordinal, name)
            n = 0 if want is None else want.shape[0]
            got = batch[f"bursts.{name}"][k]
            # The window is not along the positions' axis here (no positions=): items are as stored.
            assert count[k] == n
            if want is not None:
                assert got[:n].tobytes() == want.tobytes()
            assert (got[n:] == -7).all()


def test_a_row_with_more_items_than_max_items_is_named(annotated: str) -> None:
    reader = BatchReader(
        annotated,
        fields=("samples",),
        window=Window("time", 100),
        annotations=[Annotations("bursts", FIELDS, max_items=3)],
    )
    # Record 16 holds 4 events (ordinal % 6) and is a success.
    with pytest.raises(ValueError, match=r"record 16 holds 4 items, more than max_items=3"):
        reader.read([0, 16], starts=[0, 0])
    assert reader.read([0, 1, 2], starts=[0, 0, 0])["bursts.count"].tolist() == [0, 1, 2]


def clipped(items: np.ndarray, start: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """The reference clip: which items overlap [start, start + length), and their clipped positions."""
    keep = np.array([stop > start and begin < start + length for begin, stop in items.tolist()], dtype=bool)
    kept = items[keep] if items.size else items.reshape(0, 2)
    out = np.clip(kept, start, start + length) - start
    return keep, out.astype(items.dtype)


@pytest.mark.parametrize("max_items", [None, 6])
def test_positions_are_clipped_to_the_window_and_shifted(
    annotated: str, reference: Any, max_items: int | None
) -> None:
    length = 150
    reader = BatchReader(
        annotated,
        fields=("samples",),
        window=Window("time", length),
        annotations=[Annotations("bursts", FIELDS, positions={"intervals": "time"}, max_items=max_items)],
        extras=("start",),
    )
    ordinals = normalized(ORDER)
    rng = np.random.default_rng(3)
    starts = [int(rng.integers(0, record_length(o) - length)) for o in ordinals]
    batch = reader.read(ordinals, starts=starts)
    assert batch["start"].tolist() == starts
    dropped = kept_any = 0
    for k, ordinal in enumerate(ordinals):
        want = expected_items(reference, ordinal, "intervals")
        freq = expected_items(reference, ordinal, "freq")
        if want is None:
            keep, want_clipped, want_freq = (
                np.zeros(0, bool),
                np.zeros((0, 2), np.int64),
                np.zeros((0, 2), np.float32),
            )
        else:
            assert freq is not None
            keep, want_clipped = clipped(want, starts[k], length)
            want_freq = freq[keep]
        dropped += int((~keep).sum())
        kept_any += int(keep.sum())
        if max_items is None:
            offsets = batch["bursts.offsets"]
            got = batch["bursts.intervals"][offsets[k] : offsets[k + 1]]
            got_freq = batch["bursts.freq"][offsets[k] : offsets[k + 1]]
        else:
            n = int(batch["bursts.count"][k])
            got = batch["bursts.intervals"][k, :n]
            got_freq = batch["bursts.freq"][k, :n]
        assert got.tobytes() == want_clipped.tobytes(), ordinal
        assert got_freq.tobytes() == want_freq.tobytes(), ordinal
        assert ((got >= 0) & (got <= length)).all()
    assert dropped > 0 and kept_any > 0  # both branches of the clip ran


def test_an_item_touching_the_window_edge_is_dropped(annotated: str, reference: Any) -> None:
    """Half-open intervals: stop == start of the window, or start == its end, miss it."""

    def fits(o: int) -> bool:
        found = expected_items(reference, o, "intervals")
        return found is not None and len(found) > 0 and 10 <= found[0, 0] and found[0, 1] < record_length(o)

    ordinal = next(o for o in range(COUNT) if fits(o))
    items = expected_items(reference, ordinal, "intervals")
    assert items is not None
    begin, stop = (int(v) for v in items[0])
    reader = BatchReader(
        annotated,
        fields=("samples",),
        window=Window("time", 10, pad=True),
        annotations=[Annotations("bursts", ("intervals",), positions={"intervals": "time"})],
    )
    for start, present in ((stop, False), (begin - 10, False), (begin - 9, True), (stop - 1, True)):
        batch = reader.read([ordinal], starts=[start])
        got = batch["bursts.intervals"].tolist()
        keep, want = clipped(items, start, 10)
        assert got == want.tolist()
        assert bool(keep[0]) is present


def test_values_and_provenance_match_signal_dataset(annotated: str, reference: Any) -> None:
    reader = BatchReader(annotated, fields=("samples",), window=Window("time", 10))
    rows = reader.annotation_values(ORDER, "bursts")
    for ordinal, row in zip(normalized(ORDER), rows, strict=True):
        record = reference[ordinal]
        assert row["status"] == record.status.value
        assert row["values"] == dict(record.values)
        assert row["provenance"] == dict(record.provenance)
        assert row["detail_status"] == record.detail_status


def test_two_sets_and_many_fields_in_one_reader(tmp_path: Path) -> None:
    root = tmp_path / "captures.sds"
    dataset = write_annotated(root)
    from signal_dataset.annotation import AnnotationRecord, AnnotationStatus

    rows = [
        AnnotationRecord(
            dataset.record_metadata[i].id,
            i,
            AnnotationStatus.SUCCESS,
            fields={"score": sds.Field(np.full((1,), i, dtype=np.float64), axes=(sds.Axis("one", 1),))},
        )
        for i in range(COUNT)
    ]
    sds.publish_annotations(dataset, "scores", rows)
    reader = BatchReader(
        os.fspath(root),
        fields=("samples",),
        window=Window("time", 10),
        annotations=[Annotations("bursts", ("freq",)), Annotations("scores", ("score",), max_items=1)],
    )
    batch = reader.read([5, 2, 9], starts=[0, 0, 0])
    assert batch["scores.score"].tolist() == [[5.0], [2.0], [9.0]]
    assert batch["bursts.offsets"].tolist() == [0, 0, 2, 2]  # 5 failed; 2 holds 2; 9 has no fields


def test_names_are_checked_when_the_reader_is_made(annotated: str) -> None:
    with pytest.raises(ValueError, match=r"no annotation set 'burst'.*'bursts'"):
        BatchReader(annotated, fields=("samples",), annotations=[Annotations("burst", ("intervals",))])
    with pytest.raises(ValueError, match=r"no row of annotation set 'bursts' holds a field 'interval'"):
        BatchReader(annotated, fields=("samples",), annotations=[Annotations("bursts", ("interval",))])
    with pytest.raises(ValueError, match="positions= names field 'freq'"):
        Annotations("bursts", ("intervals",), positions={"freq": "time"})
    with pytest.raises(ValueError, match="along 'event'"):
        BatchReader(
            annotated,
            fields=("samples",),
            window=Window("time", 10),
            annotations=[Annotations("bursts", ("intervals",), positions={"intervals": "event"})],
        )
    with pytest.raises(ValueError, match="extras= takes"):
        BatchReader(annotated, fields=("samples",), extras=("ordinals",))
    with pytest.raises(ValueError, match="no window"):
        BatchReader(annotated, fields=("samples",), extras=("start",))
    with pytest.raises(TypeError, match="Annotations"):
        BatchReader(annotated, fields=("samples",), annotations=["bursts"])  # type: ignore[list-item]


@pytest.fixture
def copy_of(annotated: str, tmp_path: Path) -> Iterator[str]:
    root = tmp_path / "copy.sds"
    shutil.copytree(annotated, root)
    yield os.fspath(root)


def annotation_shards(root: str) -> list[str]:
    shards = sds.open(root).annotations["bursts"]._specification.shards
    return [os.path.join(root, shard.object.path) for shard in shards]


def test_a_damaged_row_raises_naming_the_shard_and_the_record(copy_of: str) -> None:
    shard = annotation_shards(copy_of)[1]  # ordinals 6 .. 11
    data = bytearray(Path(shard).read_bytes())
    data[300] ^= 0xFF  # inside the first row's chunk
    Path(shard).write_bytes(bytes(data))
    reader = BatchReader(
        copy_of, fields=("samples",), window=Window("time", 10), annotations=[Annotations("bursts", FIELDS)]
    )
    with pytest.raises(sds_loader.CorruptShardError, match=os.path.basename(shard)):
        reader.read([0, 6], starts=[0, 0])


def test_a_row_of_another_ordinal_fails_the_identity_check(copy_of: str) -> None:
    shards = annotation_shards(copy_of)
    # Same size (each shard is written in whole 64 KiB blocks), other ordinals.
    assert os.path.getsize(shards[0]) == os.path.getsize(shards[1])
    shutil.copyfile(shards[1], shards[0])
    # The reader reads row 0 when it is made, to check the set's names.
    with pytest.raises(sds.CorruptDatasetError, match=r"record 0 .*source_index 6"):
        BatchReader(copy_of, fields=("samples",), annotations=[Annotations("bursts", FIELDS)])


def test_a_replaced_shard_of_another_size_is_refused(copy_of: str) -> None:
    shard = annotation_shards(copy_of)[0]
    with open(shard, "ab") as handle:
        handle.write(b"\0" * 10)
    with pytest.raises(sds.CorruptDatasetError, match="bytes where the manifest that names it declares"):
        BatchReader(copy_of, fields=("samples",), annotations=[Annotations("bursts", FIELDS)])


def test_fields_that_are_not_item_aligned_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "captures.sds"
    dataset = write_annotated(root)
    from signal_dataset.annotation import AnnotationRecord, AnnotationStatus

    def fields(i: int) -> dict[str, sds.Field]:
        a = np.zeros((i % 3, 2), dtype=np.int64)
        b = np.zeros((1,), dtype=np.int16)
        return {
            "a": sds.Field(a, axes=(sds.Axis("e", i % 3), sds.Axis("p", 2))),
            "b": sds.Field(b, axes=(sds.Axis("o", 1),)),
        }

    sds.publish_annotations(
        dataset,
        "mixed",
        [
            AnnotationRecord(dataset.record_metadata[i].id, i, AnnotationStatus.SUCCESS, fields=fields(i))
            for i in range(COUNT)
        ],
    )
    reader = BatchReader(
        os.fspath(root),
        fields=("samples",),
        window=Window("time", 10),
        annotations=[Annotations("mixed", ("a", "b"))],
    )
    with pytest.raises(ValueError, match=r"record 0 holds \{'a': 0, 'b': 1\} items.*item-aligned"):
        reader.read([0], starts=[0])
    alone = BatchReader(
        os.fspath(root),
        fields=("samples",),
        window=Window("time", 10),
        annotations=[Annotations("mixed", ("a",))],
    )
    assert alone.read([2, 1], starts=[0, 0])["mixed.offsets"].tolist() == [0, 2, 3]


def test_rows_that_disagree_on_dtype_raise_mixed_shapes(tmp_path: Path) -> None:
    root = tmp_path / "captures.sds"
    dataset = write_annotated(root)
    from signal_dataset.annotation import AnnotationRecord, AnnotationStatus

    def fields(i: int) -> dict[str, sds.Field]:
        a = np.zeros((2,), dtype=np.int64 if i % 2 else np.int32)
        return {"a": sds.Field(a, axes=(sds.Axis("e", 2),))}

    sds.publish_annotations(
        dataset,
        "typed",
        [
            AnnotationRecord(dataset.record_metadata[i].id, i, AnnotationStatus.SUCCESS, fields=fields(i))
            for i in range(COUNT)
        ],
    )
    reader = BatchReader(
        os.fspath(root),
        fields=("samples",),
        window=Window("time", 10),
        annotations=[Annotations("typed", ("a",))],
    )
    with pytest.raises(
        sds_loader.MixedShapesError, match=r"I64 items .* in record 1 but I32 items .* in record 0"
    ):
        reader.read([0, 1], starts=[0, 0])
    # Batch to batch too: a field keeps the dtype its first batch had (row 0's, read when made).
    with pytest.raises(sds_loader.MixedShapesError, match=r"int64 items .* in this batch and int32"):
        reader.read([1, 3], starts=[0, 0])
    assert reader.read([2, 4], starts=[0, 0])["typed.a"].dtype == np.int32


def test_a_row_naming_another_record_id_fails_the_identity_check(annotated: str, tmp_path: Path) -> None:
    """Same ordinals, same snapshot id, other record ids: only the id check can catch it."""
    import annotation_factory
    from sds_factory import write_dataset

    def renamed(ordinal: int) -> sds.Record:
        record = annotation_factory.capture(ordinal)
        return sds.Record(
            id=f"other-{ordinal:04d}", fields=dict(record.fields), metadata=dict(record.metadata)
        )

    root = tmp_path / "other.sds"
    write_dataset(root, COUNT, renamed, records_per_shard=10)
    shutil.copytree(os.path.join(annotated, "annotations"), root / "annotations")
    assert sds.open(os.fspath(root)).annotations["bursts"]  # signal_dataset opens it...
    with pytest.raises(sds.CorruptDatasetError, match="row identity"):
        sds.open(os.fspath(root)).annotations["bursts"][0]  # ...and refuses a row
    with pytest.raises(
        sds.CorruptDatasetError, match=r"record 0 .*id is \"capture-0000\", the record's is \"other-0000\""
    ):
        BatchReader(os.fspath(root), fields=("samples",), annotations=[Annotations("bursts", FIELDS)])


def test_one_record_and_an_empty_batch_carry_the_set(uniform: str) -> None:
    reference = sds.open(uniform)
    reader = BatchReader(uniform, annotations=[Annotations("bursts", FIELDS)], extras=("id",))
    for ordinal in (2, 5, 16):
        row = reader[ordinal]
        want = expected_items(reference.annotations["bursts"], ordinal, "intervals")
        assert row["bursts.intervals"].tobytes() == (b"" if want is None else want.tobytes())
        assert "bursts.offsets" not in row and row["id"] == reference.record_metadata[ordinal].id
        assert row["samples"].shape == (500,)
    empty = reader.read([])
    assert empty["bursts.offsets"].tolist() == [0] and empty["bursts.intervals"].shape == (0, 2)
    assert empty["bursts.status"].shape == (0,) and empty["id"].shape == (0,)
