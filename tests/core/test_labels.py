"""String targets as class indices, metadata columns and ids, against signal_dataset's record metadata."""

from __future__ import annotations

import numpy as np
import pytest
import signal_dataset as sds
from annotation_factory import COUNT, MODULATIONS, write_annotated

import sds_loader
from sds_loader import BatchReader, Window

ORDER = [4, 0, 22, 9, 9, -2, 13]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("labels") / "captures.sds")
    write_annotated(path)
    return path


def metadata_of(root: str, ordinals: list[int]) -> list[dict[str, object]]:
    dataset = sds.open(root)
    return [dict(dataset.record_metadata[i % COUNT].metadata) for i in ordinals]


def test_classes_default_to_the_sorted_values_the_dataset_holds(root: str) -> None:
    reader = BatchReader(root, fields=("samples",), targets=("modulation", "label"), window=Window("time", 8))
    assert reader.labels == {"modulation": tuple(sorted(MODULATIONS))}
    batch = reader.read(ORDER, starts=[0] * len(ORDER))
    classes = reader.labels["modulation"]
    want = [classes.index(str(m["modulation"])) for m in metadata_of(root, ORDER)]
    assert batch["modulation"].dtype == np.int64 and batch["modulation"].tolist() == want
    assert batch["label"].tolist() == [m["label"] for m in metadata_of(root, ORDER)]


def test_given_classes_keep_their_order(root: str) -> None:
    order = ["fm", "qpsk", "bpsk", "16qam"]
    reader = BatchReader(
        root,
        fields=("samples",),
        targets=("modulation",),
        window=Window("time", 8),
        labels={"modulation": order},
    )
    assert reader.labels == {"modulation": tuple(order)}
    got = reader.read(ORDER, starts=[0] * len(ORDER))["modulation"].tolist()
    assert got == [order.index(str(m["modulation"])) for m in metadata_of(root, ORDER)]


def test_a_value_outside_the_given_classes_names_the_record(root: str) -> None:
    reader = BatchReader(
        root,
        fields=("samples",),
        targets=("modulation",),
        window=Window("time", 8),
        labels={"modulation": ["bpsk", "qpsk"]},
    )
    assert reader.read([0, 1, 3], starts=[0, 0, 0])["modulation"].tolist() == [0, 1, 0]
    with pytest.raises(sds_loader.TargetError, match=r"record 2 is 'fm', which is not among the classes"):
        reader.read([0, 2], starts=[0, 0])


def test_labels_for_a_key_that_is_not_a_target(root: str) -> None:
    with pytest.raises(ValueError, match="not among targets="):
        BatchReader(root, fields=("samples",), labels={"modulation": ["bpsk"]})


def test_metadata_columns_have_one_dtype_per_kind(root: str) -> None:
    reader = BatchReader(root, fields=("samples",), window=Window("time", 8))
    cols = reader.metadata(ORDER, ["label", "snr_db", "flag", "split"])
    want = metadata_of(root, ORDER)
    assert cols["label"].dtype == np.int64 and cols["label"].tolist() == [m["label"] for m in want]
    assert cols["snr_db"].dtype == np.float64 and cols["snr_db"].tolist() == [m["snr_db"] for m in want]
    assert cols["flag"].dtype == bool and cols["flag"].tolist() == [m["flag"] for m in want]
    assert cols["split"].dtype == object and cols["split"].tolist() == [m["split"] for m in want]
    everything = reader.metadata(range(COUNT), ["split"])["split"]
    train = np.flatnonzero(everything == "train")
    assert train.tolist() == [i for i in range(COUNT) if i % 3 != 2]


def test_metadata_errors_name_the_record(root: str) -> None:
    reader = BatchReader(root, fields=("samples",), window=Window("time", 8))
    with pytest.raises(sds_loader.TargetError, match=r"record 0 has no metadata key 'splits'"):
        reader.metadata([0], ["splits"])


def test_ids_without_annotations(root: str) -> None:
    reader = BatchReader(root, fields=("samples",), window=Window("time", 8), extras=("id", "ordinal"))
    batch = reader.read(ORDER, starts=[0] * len(ORDER))
    dataset = sds.open(root)
    assert list(batch["id"]) == [dataset.record_metadata[i % COUNT].id for i in ORDER]
    assert batch["ordinal"].tolist() == [i % COUNT for i in ORDER]
