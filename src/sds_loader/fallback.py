"""Serve records through signal_dataset's own reader.

Used where the native core cannot: transposed chunks, reference datasets whose
shards `read_instructions` refuses to address, and remote roots. The results
are the same arrays, filled in the same output slots, so a caller cannot tell
which path served a record except through `BatchReader.stats`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import signal_dataset as sds

from sds_loader.dtypes import safetensors_name
from sds_loader.errors import SchemaMismatch
from sds_loader.schema import FieldSpec, Schema, raise_missing, raise_not_scalar


def _guessed_tensor_key(names: Sequence[str], name: str) -> str:
    # signal_dataset's encoder names tensors by sorted field name. The native
    # core only takes this as a hint and checks it against each descriptor.
    return f"tensor_{sorted(names).index(name):06d}"


def record_fields(record: sds.Record) -> tuple[FieldSpec, ...]:
    names = list(record.fields)
    return tuple(
        FieldSpec(
            name=name,
            tensor=_guessed_tensor_key(names, name),
            dtype_name=safetensors_name(record[name].data.dtype),
            shape=tuple(record[name].data.shape),
        )
        for name in sorted(names)
    )


def fill(
    dataset: sds.Dataset,
    ordinals: np.ndarray,
    positions: np.ndarray,
    schema: Schema,
    outputs: Mapping[str, np.ndarray],
) -> None:
    """Decode `ordinals` with signal_dataset and write them at `positions`."""
    unique, inverse = np.unique(ordinals, return_inverse=True)
    records = dataset.__getitems__([int(value) for value in unique])
    for position, which in zip(positions.tolist(), inverse.tolist(), strict=True):
        record = records[which]
        ordinal = int(unique[which])
        for spec in schema.fields:
            if spec.name not in record.fields:
                raise SchemaMismatch(ordinal)
            data = record[spec.name].data
            if data.dtype != spec.dtype or tuple(data.shape) != spec.shape:
                raise SchemaMismatch(ordinal)
            outputs[spec.name][position] = data
        for target in schema.targets:
            if target.key not in record.metadata:
                raise_missing(target.key, ordinal, record.metadata.keys())
            value = record.metadata[target.key]
            if isinstance(value, bool) or isinstance(value, int | float):
                if target.kind == "i" and isinstance(value, float):
                    if not value.is_integer():
                        from sds_loader.errors import TargetError

                        raise TargetError(
                            f"metadata {target.key!r} of record {ordinal} is {value!r}, "
                            "where the batch's first record holds an integer; write the "
                            "key with one type throughout"
                        )
                outputs[target.key][position] = value
            else:
                raise_not_scalar(target.key, ordinal, value)
