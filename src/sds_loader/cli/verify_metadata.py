"""Check a metadata shard: every chunk hash and every record's JSON.

Metadata shards hold one compact JSON document per record rather than
SafeTensors, so the native `verify_shard` (which checks SafeTensors headers)
does not apply. They are small (a few hundred bytes a record), so they are
read through array_record, whose Riegeli reader checks every chunk's header
and data hashes as it reads, and each record is parsed as JSON. Problems come
back in the shape `verify_shard` uses, so `verify` reports both alike.
"""

from __future__ import annotations

import json
from typing import Any

from sds_loader.errors import CorruptShardError

#: What signal_dataset's own reader passes (StorageOptions.reader_options).
READER_OPTIONS = "readahead_buffer_size:0,max_parallelism:0"


def _problem(record: int, message: str) -> dict[str, Any]:
    return {"chunk": -1, "record": record, "offset": -1, "message": message}


def _json_problem(record: int, value: bytes) -> dict[str, Any] | None:
    try:
        document = json.loads(value)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return _problem(record, f"metadata record is not JSON ({exc})")
    if not isinstance(document, dict):
        return _problem(record, f"metadata record is JSON {type(document).__name__}, not an object")
    return None


def verify_shard(path: str) -> list[dict[str, Any]]:
    """Every problem of the metadata shard at `path`; [] when clean."""
    from array_record.python.array_record_module import ArrayRecordReader

    try:
        reader = ArrayRecordReader(path, READER_OPTIONS)
    except (RuntimeError, ValueError) as exc:
        raise CorruptShardError(f"metadata shard {path} cannot be opened: {exc}") from None
    try:
        indices = list(range(reader.num_records()))
        try:
            values = list(enumerate(reader.read(indices)))
            failed: list[dict[str, Any]] = []
        except RuntimeError:
            # Some chunk is bad: read record by record to name each one lost.
            values, failed = [], []
            for index in indices:
                try:
                    values.append((index, reader.read([index])[0]))
                except RuntimeError as exc:
                    failed.append(_problem(index, str(exc)))
        found = failed + [p for p in (_json_problem(i, v) for i, v in values) if p is not None]
        return sorted(found, key=lambda problem: problem["record"])
    finally:
        reader.close()
