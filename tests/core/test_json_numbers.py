"""Every JSON number spelling is read as signal_dataset reads it.

signal_dataset parses SafeTensors headers and record descriptors with
Python's `json`: an integer literal stays exact however long it is, and a
literal with a fraction or an exponent is rounded to the nearest double,
overflowing to an infinity (which its metadata check then refuses) and
underflowing to a signed zero. safetensors then reads the header's offsets
and shapes again with serde_json, as usize.

Each case writes a real dataset with signal_dataset, rewrites one record's
descriptor or header so that one number has an unusual but valid spelling
(hashes rewritten by array_record's own writer), and compares the native
reader with signal_dataset's: the same value, bit for bit, or the typed error
that a value out of int64 or float64 range deserves, naming the ordinal, the
key and the text; where signal_dataset refuses the record, a
CorruptShardError.
"""

from __future__ import annotations

import json
import os
import re
import struct

import numpy as np
import pytest
import signal_dataset as sds
from sds_factory import assert_matches_reference
from shard_surgery import (
    one_shard_dataset,
    safetensors_parts,
    with_descriptor,
    with_record_replaced,
)
from signal_dataset.errors import ValidationError

import sds_loader

VICTIM = 1
PLACEHOLDER = "@@number@@"

#: Spellings of metadata values, all valid JSON. The second item says whether
#: signal_dataset reads the record (False: Python's json gives an infinity,
#: which signal_dataset's metadata check refuses, or refuses an integer of
#: more than 4,300 digits).
METADATA_SPELLINGS = {
    "zero-huge-exponent": ("0e100", True),
    "zero-past-double-exponent": ("0e400", True),
    "negative-zero-float": ("-0.0", True),
    "negative-zero-integer": ("-0", True),
    "underflow": ("1E-400", True),
    "negative-underflow": ("-1E-400", True),
    "overflow": ("1e309", False),
    "negative-overflow": ("-1.7976931348623159e308", False),
    "largest-double": ("1.7976931348623157e308", True),
    "smallest-subnormal": ("4.9e-324", True),
    "halfway-below-subnormal": ("2.4703282292062327e-324", True),
    "halfway-above-subnormal": ("2.4703282292062328e-324", True),
    "forty-digit-mantissa": ("1.000000000000000000000000000000000000001", True),
    "forty-digit-zero-mantissa": ("0.0000000000000000000000000000000000000000000000", True),
    "long-integer-mantissa": ("123456789012345678901234567890123456789e-30", True),
    "exponent-leading-zeros": ("1e007", True),
    "signed-exponent-leading-zeros": ("25E+0010", True),
    "negative-exponent-leading-zeros": ("5e-0003", True),
    "int64-max": ("9223372036854775807", True),
    "int64-min": ("-9223372036854775808", True),
    "two-to-63": ("9223372036854775808", True),
    "below-int64-min": ("-9223372036854775809", True),
    "two-to-64": ("18446744073709551616", True),
    "forty-digit-integer": ("1234567890123456789012345678901234567890", True),
    "four-hundred-digit-integer": ("9" * 400, True),
    "python-longest-integer": ("7" * 4300, True),
    "past-python-longest-integer": ("7" * 4301, False),
    "long-fraction-huge-exponent": ("0." + "0" * 5000 + "1e5000", True),
}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return one_shard_dataset(tmp_path_factory.mktemp("numbers") / "dataset")


def craft(tmp_path, pristine, payload: bytes):
    return with_record_replaced(pristine, tmp_path, VICTIM, payload)


def spelled_metadata(payload: bytes, key: str, spelling: str) -> bytes:
    """The record with metadata `key` written as `spelling`, byte for byte."""

    def edit(descriptor):
        descriptor["metadata"][key] = PLACEHOLDER
        text = json.dumps(descriptor, separators=(",", ":"))
        return text.replace(json.dumps(PLACEHOLDER), spelling).encode()

    return with_descriptor(payload, edit)


def reference_value(root, key):
    """What signal_dataset reads for the victim's metadata `key`, or the
    ValidationError it raises."""
    try:
        return sds.open(os.fspath(root))[VICTIM].metadata[key]
    except ValidationError as error:
        return error


def python_json(spelling: str):
    try:
        return json.loads(spelling)
    except ValueError as error:  # past Python's integer digit limit
        return error


def int64_or_none(value):
    """The int64 a target holds for `value`, as the batch's integer kind takes
    it, or None where int64 cannot hold it."""
    if isinstance(value, float):
        if not (np.isfinite(value) and value.is_integer()):
            return None
        value = int(value)
    return value if -(2**63) <= value < 2**63 else None


def float64_or_none(value):
    try:
        return float(value)
    except OverflowError:
        return None


def assert_target_error(raised, key: str, value, dtype: str):
    """The error names the ordinal, the key, and the value: an integer by its
    exact digits and the dtype that cannot hold it, a float by its repr."""
    message = str(raised.value)
    assert re.search(rf"\brecord {VICTIM}\b", message), message
    assert f'"{key}"' in message, message
    if isinstance(value, int):
        assert str(value) in message and dtype in message, message
    else:
        assert repr(value) in message, message


@pytest.mark.parametrize("name", sorted(METADATA_SPELLINGS))
def test_metadata_number_spellings(tmp_path, pristine, name):
    spelling, accepted = METADATA_SPELLINGS[name]
    for key, batch_kind in (("label", "i"), ("snr_db", "f")):
        case = tmp_path / key
        case.mkdir()
        root, _ = craft(case, pristine, spelled_metadata(pristine[1][VICTIM], key, spelling))
        reference = reference_value(root, key)
        assert isinstance(reference, ValidationError) == (not accepted), (spelling, reference)
        python = python_json(spelling)
        reader = sds_loader.BatchReader(root, fields=("samples",), targets=(key,), threads=1)
        if not accepted:
            with pytest.raises(sds_loader.CorruptShardError) as raised:
                reader.read([0, VICTIM])
            assert re.search(rf"\brecord {VICTIM}\b", str(raised.value)), str(raised.value)
            continue
        assert type(reference) is type(python) and (reference == python), (reference, python)
        # The reader takes a target's kind from record 0: label is an integer
        # there, snr_db a float.
        expected = int64_or_none(reference) if batch_kind == "i" else float64_or_none(reference)
        if expected is None:
            with pytest.raises(sds_loader.TargetError) as raised:
                reader.read([0, VICTIM])
            assert_target_error(raised, key, reference, "int64" if batch_kind == "i" else "float64")
        else:
            batch = reader.read([0, VICTIM])
            got = batch[key][1]
            if batch_kind == "i":
                assert batch[key].dtype == np.int64 and int(got) == expected, (spelling, got, expected)
            else:
                assert batch[key].dtype == np.float64
                assert struct.pack("<d", got) == struct.pack("<d", expected), (spelling, got, expected)
            assert_matches_reference(root, batch, [0, VICTIM], ("samples",))


#: Spellings of the victim tensor's end offset. safetensors reads offsets as
#: usize with serde_json, which refuses every one of these though Python's
#: json reads some as integers (`-0`): signal_dataset refuses the record.
OFFSET_SPELLINGS = {
    "negative-zero-begin": ("-0", None),
    "float-end": (None, "{end}.0"),
    "exponent-end": (None, "{end}e0"),
    "past-2-to-64-end": (None, "18446744073709551616"),
    "four-hundred-digit-end": (None, "9" * 400),
    "zero-mantissa-begin": ("0.0000000000000000000000000000000000000000000000", None),
    "zero-huge-exponent-begin": ("0e400", None),
}


def spelled_offsets(payload: bytes, begin: str | None, end: str | None) -> bytes:
    header, data = safetensors_parts(payload)
    key = sorted(name for name in header if name.startswith("tensor_"))[0]
    first, last = header[key]["data_offsets"]
    assert first == 0, "the first field's tensor starts the data"
    header[key]["data_offsets"] = PLACEHOLDER
    text = json.dumps(header, separators=(",", ":"))
    spelled = f"[{begin or first},{(end or str(last)).format(end=last)}]"
    text = text.replace(json.dumps(PLACEHOLDER), spelled).encode()
    return struct.pack("<Q", len(text)) + text + data


@pytest.mark.parametrize("name", sorted(OFFSET_SPELLINGS))
def test_safetensors_offset_spellings(tmp_path, pristine, name):
    begin, end = OFFSET_SPELLINGS[name]
    root, shard = craft(tmp_path, pristine, spelled_offsets(pristine[1][VICTIM], begin, end))
    with pytest.raises(ValidationError):
        sds.open(os.fspath(root))[VICTIM]
    reader = sds_loader.BatchReader(root, fields=("samples",), threads=1)
    with pytest.raises(sds_loader.CorruptShardError) as raised:
        reader.read([0, VICTIM])
    message = str(raised.value)
    assert os.path.basename(shard) in message and re.search(rf"\brecord {VICTIM}\b", message), message
    assert_matches_reference(root, reader.read([2, 0]), [2, 0], ("samples",))


def test_offsets_spelled_plainly_still_read(tmp_path, pristine):
    """The surgery itself keeps a record readable when the spelling is plain."""
    root, _ = craft(tmp_path, pristine, spelled_offsets(pristine[1][VICTIM], "0", None))
    reader = sds_loader.BatchReader(root, fields=("samples",), threads=1)
    assert_matches_reference(root, reader.read([VICTIM, 0]), [VICTIM, 0], ("samples",))
    assert reader.stats.native_records == 2
