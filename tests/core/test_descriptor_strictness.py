"""Records whose SafeTensors header or descriptor signal_dataset refuses are
refused here too, as CorruptShardError naming the shard and the ordinal; the
variants it accepts still read, byte for byte.

Each record is rewritten through array_record's own writer, so hashes and
framing are those of a real shard and only the record's contents differ.
"""

from __future__ import annotations

import copy
import json
import os
import re

import pytest
import signal_dataset as sds
from sds_factory import assert_matches_reference
from shard_surgery import (
    one_shard_dataset,
    safetensors_parts,
    safetensors_record,
    with_descriptor,
    with_record_replaced,
)

import sds_loader

FIELDS = ["samples"]
VICTIM = 1


def edited(change):
    def edit(descriptor):
        descriptor = copy.deepcopy(descriptor)
        change(descriptor)
        return descriptor

    return edit


def samples(descriptor):
    return descriptor["fields"]["samples"]


def first_axis(descriptor):
    return samples(descriptor)["axes"][0]


REFUSED_DESCRIPTORS = {
    "field-without-tensor": edited(lambda d: samples(d).pop("tensor")),
    "tensor-not-a-string": edited(lambda d: samples(d).update(tensor=0)),
    "missing-tensor": edited(lambda d: samples(d).update(tensor="tensor_000009")),
    "descriptor-as-field": edited(lambda d: samples(d).update(tensor="__sds_descriptor__")),
    "field-not-an-object": edited(lambda d: d["fields"].update(samples=["tensor_000000"])),
    "fields-not-an-object": edited(lambda d: d.update(fields=[])),
    "no-fields": edited(lambda d: d.pop("fields")),
    "empty-fields": edited(lambda d: d.update(fields={})),
    "no-id": edited(lambda d: d.pop("id")),
    "empty-id": edited(lambda d: d.update(id="")),
    "id-not-a-string": edited(lambda d: d.update(id=7)),
    "scene-id-not-a-string": edited(lambda d: d.update(scene_id=3)),
    "wrong-version": edited(lambda d: d.update(version="0.2")),
    "no-version": edited(lambda d: d.pop("version")),
    "metadata-a-list": edited(lambda d: d.update(metadata=[1])),
    "field-metadata-a-string": edited(lambda d: samples(d).update(metadata="x")),
    "axes-not-a-list": edited(lambda d: samples(d).update(axes=None)),
    "axis-length-wrong": edited(lambda d: first_axis(d).update(length=first_axis(d)["length"] + 1)),
    "axis-length-negative": edited(lambda d: first_axis(d).update(length=-2)),
    "axis-length-a-bool": edited(lambda d: first_axis(d).update(length=True)),
    "axis-length-a-float": edited(lambda d: first_axis(d).update(length=2.0)),
    "axis-missing": edited(lambda d: samples(d)["axes"].pop()),
    "axis-extra": edited(lambda d: samples(d)["axes"].append({"name": "z", "length": 1})),
    "axis-without-name": edited(lambda d: first_axis(d).pop("name")),
    "axis-names-repeat": edited(lambda d: samples(d)["axes"][1].update(name=first_axis(d)["name"])),
    "axis-role-a-number": edited(lambda d: first_axis(d).update(role=1)),
    "coordinate-start-without-step": edited(lambda d: first_axis(d).update(coordinate={"start": 0})),
    "coordinate-start-a-bool": edited(lambda d: first_axis(d).update(coordinate={"start": True, "step": 1})),
    "coordinate-two-forms": edited(
        lambda d: first_axis(d).update(coordinate={"start": 0, "step": 1, "values": [1, 2]})
    ),
    "coordinate-values-wrong-length": edited(lambda d: first_axis(d).update(coordinate={"values": [1]})),
    "coordinate-reference-unresolved": edited(
        lambda d: first_axis(d).update(coordinate={"reference": "nowhere"})
    ),
    "shared-axis-disagrees": edited(
        lambda d: (first_axis(d).update(id="t"), samples(d)["axes"][1].update(id="t"))
    ),
    "shared-axis-coordinates-disagree": edited(
        lambda d: (
            first_axis(d).update(id="t", length=2, coordinate={"values": [1, 2]}),
            samples(d)["axes"][1].update(id="t", coordinate={"start": 0, "step": 1}),
        )
    ),
    "coordinate-values-an-object": edited(lambda d: first_axis(d).update(coordinate={"values": {"a": 1}})),
    "coordinate-unit-a-number": edited(
        lambda d: first_axis(d).update(coordinate={"start": 0, "step": 1, "unit": 5})
    ),
    "coordinate-step-a-string": edited(lambda d: first_axis(d).update(coordinate={"start": 0, "step": "1"})),
    "coordinate-reference-a-number": edited(lambda d: first_axis(d).update(coordinate={"reference": 3})),
    "coordinate-metadata-a-list": edited(
        lambda d: first_axis(d).update(coordinate={"start": 0, "step": 1, "metadata": [1]})
    ),
    "coordinate-not-an-object": edited(lambda d: first_axis(d).update(coordinate=[0, 1])),
    "coordinate-duplicate-key": lambda d: json_bytes(
        {
            **d,
            "fields": {
                "samples": {
                    **samples(d),
                    "axes": [{**first_axis(d), "coordinate": "@@"}, *samples(d)["axes"][1:]],
                }
            },
        }
    ).replace(b'"@@"', b'{"start": 0, "start": 1, "step": 1}'),
    "shared-axis-coordinate-metadata-disagrees": edited(
        lambda d: (
            first_axis(d).update(
                id="t", length=2, coordinate={"start": 0, "step": 1, "metadata": {"a": [1]}}
            ),
            samples(d)["axes"][1].update(id="t", coordinate={"start": 0, "step": 1, "metadata": {"a": [2]}}),
        )
    ),
    "duplicate-key": lambda d: b'{"format":"signal-dataset.record","format":"signal-dataset.record"}',
    # Invalid UTF-8 in a string: an ASCII document skips the encoding check, any other must not.
    "id-invalid-utf8": lambda d: json_bytes({**d, "id": "ID"}).replace(b'"ID"', b'"\xff\xfe"'),
    "id-truncated-utf8": lambda d: json_bytes({**d, "id": "ID"}).replace(b'"ID"', b'"caf\xc3"'),
    "not-an-object": lambda d: b"[]",
}

ACCEPTED_DESCRIPTORS = {
    "metadata-null": edited(lambda d: d.update(metadata=None)),
    "field-metadata-zero": edited(lambda d: samples(d).update(metadata=0)),
    "scene-id-null": edited(lambda d: d.update(scene_id=None)),
    "extra-top-level-key": edited(lambda d: d.update(note="kept")),
    "coordinate-nested-metadata": edited(
        lambda d: first_axis(d).update(
            coordinate={"start": 0, "step": 1, "metadata": {"a": {"b": [1, None, "x"]}}}
        )
    ),
    "coordinate-explicit-values": edited(
        lambda d: first_axis(d).update(
            coordinate={"values": list(range(first_axis(d)["length"])), "unit": None}
        )
    ),
    "coordinate-metadata-empty-list": edited(
        lambda d: first_axis(d).update(coordinate={"start": 0, "step": 1, "metadata": []})
    ),
    "linear-coordinate": edited(
        lambda d: first_axis(d).update(coordinate={"start": 0, "step": 0.5, "unit": "s"})
    ),
    "coordinate-reference-to-field": edited(
        lambda d: first_axis(d).update(coordinate={"reference": "samples"})
    ),
    "shared-axis-same-coordinate": edited(
        lambda d: [
            samples(d)["axes"][k].update(id=f"axis{k}", coordinate={"start": 0, "step": 1}) for k in (0, 1)
        ]
    ),
    "empty-reference": edited(lambda d: first_axis(d).update(coordinate={"reference": ""})),
    # Raw (unescaped) UTF-8, as json.dumps(ensure_ascii=False) writes it.
    "id-raw-utf8": lambda d: json_bytes({**d, "id": "café-Ωμέγα"}),
}


def json_bytes(descriptor) -> bytes:
    return json.dumps(descriptor, ensure_ascii=False).encode()


def header_edit(change):
    def edit(payload):
        header, data = safetensors_parts(payload)
        header, data = change(copy.deepcopy(header), data)
        return safetensors_record(header, data)

    return edit


def add_tensor(header, data, dtype="U8"):
    header["extra"] = {
        "dtype": dtype,
        "shape": [2],
        "data_offsets": [len(data), len(data) + (2 if dtype == "U8" else 4)],
    }
    return header, data + b"\0" * (2 if dtype == "U8" else 4)


REFUSED_HEADERS = {
    "unclaimed-tensor": header_edit(add_tensor),
    "bf16-tensor": header_edit(lambda h, d: add_tensor(h, d, "BF16")),
    "trailing-data": header_edit(lambda h, d: (h, d + b"\0\0\0\0")),
    "metadata-not-strings": header_edit(lambda h, d: ({**h, "__metadata__": {"a": 1}}, d)),
}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return one_shard_dataset(tmp_path_factory.mktemp("pristine") / "dataset")


def craft(tmp_path, pristine, payload: bytes):
    return with_record_replaced(pristine, tmp_path, VICTIM, payload)


def assert_refused(root, shard):
    # Every crafted record here is one signal_dataset's codec validates and refuses.
    with pytest.raises(sds.errors.ValidationError):
        reference = sds.open(os.fspath(root))
        reference[VICTIM]["samples"]
    for verify in (True, False):
        reader = sds_loader.BatchReader(root, fields=FIELDS, verify_checksums=verify, threads=1)
        with pytest.raises(sds_loader.CorruptShardError) as raised:
            reader.read([0, VICTIM, 2])
        message = str(raised.value)
        assert os.path.basename(shard) in message and re.search(rf"\brecord {VICTIM}\b", message), message
        assert_matches_reference(root, reader.read([2, 0]), [2, 0], FIELDS)


@pytest.mark.parametrize("name", sorted(REFUSED_DESCRIPTORS))
def test_descriptor_signal_dataset_refuses_is_corrupt(tmp_path, pristine, name):
    payload = with_descriptor(pristine[1][VICTIM], REFUSED_DESCRIPTORS[name])
    assert_refused(*craft(tmp_path, pristine, payload))


@pytest.mark.parametrize("name", sorted(REFUSED_HEADERS))
def test_safetensors_header_signal_dataset_refuses_is_corrupt(tmp_path, pristine, name):
    payload = REFUSED_HEADERS[name](pristine[1][VICTIM])
    assert_refused(*craft(tmp_path, pristine, payload))


@pytest.mark.parametrize("name", sorted(ACCEPTED_DESCRIPTORS))
def test_descriptor_signal_dataset_accepts_still_reads(tmp_path, pristine, name):
    payload = with_descriptor(pristine[1][VICTIM], ACCEPTED_DESCRIPTORS[name])
    root, _ = craft(tmp_path, pristine, payload)
    reader = sds_loader.BatchReader(root, fields=FIELDS, threads=1)
    assert_matches_reference(root, reader.read([VICTIM, 0]), [VICTIM, 0], FIELDS)
    assert reader.stats.native_records == 2
