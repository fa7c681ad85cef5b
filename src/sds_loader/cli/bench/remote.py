"""`sds-loader bench s3://...`: sparse reads from object storage, in time and in bytes.

Over a network the question is not CPU work but what a read costs in
requests and bytes: a sparse batch (a few records from each of many shards,
as a shuffled epoch reads) is where a reader that stages whole shards pays
the most. Each method reads the same seeded random batches:

- signal_dataset: a freshly opened `Dataset.__getitems__` per batch. It
  stages every shard a batch touches whole, so its bytes are the sizes of
  those shards (taken from the store, not measured on the wire).
- BatchReader, cold: a new reader per batch, so each batch also pays for the
  footers of the shards it touches, as the first batch of a job does.
- BatchReader, warm: one reader for all batches, footers already cached, as
  every later batch of an epoch is.

For the two BatchReader rows bytes and requests are counted by the reader
itself (`stats.fetched_bytes`, `stats.fetch_requests`). "x own size" relates
bytes fetched per record to the record's own stored size (the dataset's shard
bytes over its records), so 1.0 would be reading nothing but the records.
Each row reports the median batch of `--batches`; the methods take turns
batch by batch, so a machine busy with other work slows them alike, and
garbage is collected before each batch, so none pays for another's.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import signal_dataset as sds

from sds_loader.cli.textfmt import rate, size, table

if TYPE_CHECKING:
    from sds_loader.reader import BatchReader

HEADER = ["method", "records/s", "batch s", "requests/batch", "fetched/record", "x own size", "note"]
RIGHT = [False, True, True, True, True, True, False]


@dataclass
class RemoteRow:
    method: str
    records_per_s: float
    batch_seconds: float
    requests_per_batch: float | None
    bytes_per_record: float
    x_own_size: float
    note: str = ""


@dataclass
class RemoteResult:
    uri: str
    records: int
    batch_size: int
    batches: int
    record_bytes: float
    requests_in_flight: int
    rows: list[RemoteRow]


def is_remote(path: str | None) -> bool:
    return path is not None and "://" in path and not path.startswith("file://")


def run(
    uri: str,
    *,
    batch_size: int,
    batches: int,
    requests_in_flight: int | None = None,
    fields: tuple[str, ...] | None = None,
    seed: int = 0,
) -> RemoteResult:
    from sds_loader import BatchReader
    from sds_loader.s3_source import DEFAULT_REQUESTS_IN_FLIGHT

    dataset = sds.open(uri)
    if len(dataset) == 0:
        raise ValueError(f"dataset {uri} holds no records; there is nothing to time")
    instructions = dataset.read_instructions(0, len(dataset))
    shard_of = {}
    for instruction in instructions:
        shard_of.update(
            {
                o: instruction.filename
                for o in range(instruction.first_ordinal, instruction.first_ordinal + instruction.take)
            }
        )
    shard_sizes = {name: dataset.object_store.info(name).size for name in dict.fromkeys(shard_of.values())}
    record_bytes = sum(shard_sizes.values()) / len(dataset)
    rng = np.random.default_rng(seed)
    count = min(batch_size, len(dataset))
    plan = [np.sort(rng.choice(len(dataset), size=count, replace=False)) for _ in range(batches + 1)]
    warmup, timed = plan[0], plan[1:]
    options: dict[str, Any] = dict(fields=fields, requests_in_flight=requests_in_flight)

    def signal_dataset_batch(ordinals: np.ndarray) -> tuple[int | None, int]:
        sds.open(uri).__getitems__(ordinals.tolist())
        return None, sum(shard_sizes[name] for name in {shard_of[int(o)] for o in ordinals})

    def cold_batch(ordinals: np.ndarray) -> tuple[int | None, int]:
        reader = BatchReader(uri, **options)
        reader.read(ordinals)
        _require_native(reader)
        reader.close()
        return reader.stats.fetch_requests, reader.stats.fetched_bytes

    warm_reader = BatchReader(uri, **options)
    warm_reader.read(warmup)
    _require_native(warm_reader)

    def warm_batch(ordinals: np.ndarray) -> tuple[int | None, int]:
        before = (warm_reader.stats.fetch_requests, warm_reader.stats.fetched_bytes)
        warm_reader.read(ordinals)
        return warm_reader.stats.fetch_requests - before[0], warm_reader.stats.fetched_bytes - before[1]

    methods: list[tuple[str, Callable[[np.ndarray], tuple[int | None, int]], str]] = [
        (
            "signal_dataset Dataset.__getitems__",
            signal_dataset_batch,
            "stages whole shards: bytes are the shards touched",
        ),
        ("BatchReader, cold (new reader per batch)", cold_batch, "footers included"),
        ("BatchReader, warm (footers cached)", warm_batch, ""),
    ]
    # The methods take turns batch by batch, so that load from other work on
    # the machine falls on all of them alike and their ratio holds.
    seconds: dict[str, list[float]] = {name: [] for name, _, _ in methods}
    requests: dict[str, list[int | None]] = {name: [] for name, _, _ in methods}
    fetched: dict[str, list[int]] = {name: [] for name, _, _ in methods}
    for ordinals in timed:
        for name, method, _ in methods:
            # The garbage a method leaves (a boto3 client is thousands of
            # objects in cycles) is collected here, not inside the next one's time.
            gc.collect()
            started = time.perf_counter()
            made, got = method(ordinals)
            seconds[name].append(time.perf_counter() - started)
            requests[name].append(made)
            fetched[name].append(got)
    rows = []
    for name, _, note in methods:
        middle = statistics.median(seconds[name])
        per_record = statistics.median(fetched[name]) / count
        made_per_batch = requests[name]
        rows.append(
            RemoteRow(
                method=name,
                records_per_s=count / middle,
                batch_seconds=middle,
                requests_per_batch=(
                    None
                    if made_per_batch[0] is None
                    else statistics.median(m for m in made_per_batch if m is not None)
                ),
                bytes_per_record=per_record,
                x_own_size=per_record / record_bytes,
                note=note,
            )
        )
    warm_reader.close()
    return RemoteResult(
        uri=uri,
        records=len(dataset),
        batch_size=count,
        batches=batches,
        record_bytes=record_bytes,
        requests_in_flight=requests_in_flight or DEFAULT_REQUESTS_IN_FLIGHT,
        rows=rows,
    )


def _require_native(reader: BatchReader) -> None:
    if reader.stats.native_records == 0:
        raise ValueError(
            f"{reader.uri} is not read natively ({reader.native_unavailable_reason or 'records declined'}); "
            "this benchmark times native ranged reads"
        )


def legend(result: RemoteResult) -> str:
    return (
        f"{result.uri}: {result.records} records, {size(result.record_bytes)} stored per record "
        "(shard bytes over records, footers included); "
        f"{result.batches} random batches of {result.batch_size} (median shown), "
        f"{result.requests_in_flight} requests in flight"
    )


def text(result: RemoteResult) -> str:
    cells = [
        [
            row.method,
            rate(row.records_per_s),
            f"{row.batch_seconds:.3f}",
            "-" if row.requests_per_batch is None else f"{row.requests_per_batch:.0f}",
            size(row.bytes_per_record),
            f"{row.x_own_size:.2f}",
            row.note,
        ]
        for row in result.rows
    ]
    return table(HEADER, cells, right=RIGHT)


def write(result: RemoteResult, out: str) -> str:
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "bench-remote.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"format": "sds-loader-bench-remote/1", **asdict(result)}, handle, indent=2)
    return path
