"""A descriptor that differs from the record before it only in its id's and
metadata's values is recognised from that record's descriptor without being
parsed again (csrc/record/descriptor_template.cc). Here each crafted record
keeps its neighbour's descriptor byte for byte outside those values, and is
read in one batch after the neighbour on one thread, so the fast path meets
it: what signal_dataset refuses is still refused, and what it accepts reads
with the same values, byte for byte.
"""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
import signal_dataset as sds
from sds_factory import assert_matches_reference
from shard_surgery import one_shard_dataset, safetensors_parts, with_descriptor, with_record_replaced

import sds_loader

FIELDS = ["samples"]
VICTIM = 1


def original_descriptor(payload: bytes) -> bytes:
    header, data = safetensors_parts(payload)
    begin, end = header["__sds_descriptor__"]["data_offsets"]
    return data[begin:end]


# Values the pristine victim holds: "id":"capture-000001", "label":1, "snr_db":<float>.
REFUSED = {
    "id-empty": (b'"id":"capture-000001"', b'"id":""'),
    "id-a-number": (b'"id":"capture-000001"', b'"id":7'),
    "id-null": (b'"id":"capture-000001"', b'"id":null'),
    "id-control-byte": (b'"id":"capture-000001"', b'"id":"cap\x01ture"'),
    "id-invalid-utf8": (b'"id":"capture-000001"', b'"id":"cap\xffture"'),
    "id-unterminated": (b'"id":"capture-000001"', b'"id":"capture-000001'),
    "id-bad-escape": (b'"id":"capture-000001"', b'"id":"cap\\qture"'),
    "label-leading-zero": (b'"label":1', b'"label":01'),
    "label-trailing-point": (b'"label":1', b'"label":1.'),
    "label-bare-minus": (b'"label":1', b'"label":-'),
    "label-leading-point": (b'"label":1', b'"label":.5'),
    "label-plus": (b'"label":1', b'"label":+1'),
    "label-empty-exponent": (b'"label":1', b'"label":1e'),
    "label-nan": (b'"label":1', b'"label":NaN'),
    "label-infinity": (b'"label":1', b'"label":Infinity'),
    "label-truth": (b'"label":1', b'"label":True'),
    "label-hex": (b'"label":1', b'"label":0x1'),
    "label-overflowing-float": (b'"label":1', b'"label":1e400'),
    "label-too-many-digits": (b'"label":1', b'"label":' + b"9" * 5000),
    "label-missing": (b'"label":1', b'"label":'),
    "label-two-values": (b'"label":1', b'"label":1 2'),
}

ACCEPTED = {
    "id-other": (b'"id":"capture-000001"', b'"id":"another-id"'),
    "id-escaped": (b'"id":"capture-000001"', b'"id":"caf\\u00e9"'),
    "id-raw-utf8": (b'"id":"capture-000001"', '"id":"café"'.encode()),
    "label-negative": (b'"label":1', b'"label":-3'),
    "label-large": (b'"label":1', b'"label":9007199254740993'),
    "label-a-float": (b'"label":1', b'"label":2.0'),
    "label-exponent": (b'"label":1', b'"label":1E2'),
    "label-negative-zero": (b'"label":1', b'"label":-0'),
    "label-true": (b'"label":1', b'"label":true'),
    "label-null": (b'"label":1', b'"label":null'),
    "label-a-string": (b'"label":1', b'"label":"one"'),
    "label-past-64-bits": (b'"label":1', b'"label":184467440737095516160'),
    "label-underflowing-float": (b'"label":1', b'"label":1e-400'),
    "label-zero-exponent-past-range": (b'"label":1', b'"label":0e400'),
    "label-spaced": (b'"label":1', b'"label": 1'),
}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return one_shard_dataset(tmp_path_factory.mktemp("pristine") / "dataset")


def craft(tmp_path, pristine, old: bytes, new: bytes):
    payload = pristine[1][VICTIM]
    original = original_descriptor(payload)
    assert old in original, original
    return with_record_replaced(
        pristine, tmp_path, VICTIM, with_descriptor(payload, lambda _: original.replace(old, new, 1))
    )


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_value_is_corrupt_after_a_matching_record(tmp_path, pristine, name):
    root, shard = craft(tmp_path, pristine, *REFUSED[name])
    with pytest.raises(sds.errors.SignalDatasetError):
        sds.open(os.fspath(root))[VICTIM]["samples"]
    for verify in (True, False):
        reader = sds_loader.BatchReader(root, fields=FIELDS, verify_checksums=verify, threads=1)
        # Record 0 comes first: its descriptor is the one the victim's is compared with.
        with pytest.raises(sds_loader.CorruptShardError) as raised:
            reader.read([0, VICTIM, 2])
        message = str(raised.value)
        assert os.path.basename(shard) in message and re.search(rf"\brecord {VICTIM}\b", message), message
        # And the records around it still read, through the same thread's template.
        assert_matches_reference(root, reader.read([2, 0]), [2, 0], FIELDS)


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted_value_reads_after_a_matching_record(tmp_path, pristine, name):
    root, _ = craft(tmp_path, pristine, *ACCEPTED[name])
    reference = sds.open(os.fspath(root))
    label = reference[VICTIM].metadata["label"]
    reader = sds_loader.BatchReader(root, fields=FIELDS, threads=1)
    order = [0, VICTIM, 2, VICTIM, 0]
    assert_matches_reference(root, reader.read(order), order, FIELDS)
    assert reader.stats.native_records == len(order)
    if isinstance(label, (int, float)) and label is not None and abs(float(label)) < 1e300:
        # As a float target (the probe reads record 0's integer label, so ask for floats).
        targeted = sds_loader.BatchReader(root, fields=FIELDS, targets=["snr_db", "label"], threads=1)
        try:
            batch = targeted.read(order)
        except sds_loader.TargetError:
            # An integer target that the victim's value cannot be: refused as a
            # full parse refuses it; nothing more to compare.
            return
        for row, index in enumerate(order):
            record = reference[index]
            assert batch["snr_db"][row] == record.metadata["snr_db"]
            assert batch["label"][row] == record.metadata["label"], (index, batch["label"][row])


def test_values_of_every_record_match_after_many_records(tmp_path):
    """Many records, one template: every row's targets are its own record's."""
    from sds_factory import write_dataset

    root = tmp_path / "dataset"
    write_dataset(root, 64)
    reference = sds.open(os.fspath(root))
    reader = sds_loader.BatchReader(root, fields=FIELDS, targets=["label", "snr_db"], threads=1)
    order = np.random.default_rng(3).permutation(64)
    batch = reader.read(order)
    assert_matches_reference(root, batch, order.tolist(), FIELDS, targets=["label", "snr_db"])
    for row, index in enumerate(order.tolist()):
        assert batch["snr_db"][row] == reference[index].metadata["snr_db"]
