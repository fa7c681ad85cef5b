"""`sds-loader bench s3://...`: sparse reads from object storage, in time and in bytes.

Over a network the question is not CPU work but what a read costs in
requests and bytes: a sparse batch (a few records from each of many shards,
as a shuffled epoch reads) is where a reader that stages whole shards pays
the most. Each method reads the same seeded random batches:

- signal_dataset: a freshly opened `Dataset.__getitems__` per batch, which
  stages every shard a batch touches whole.
- BatchReader, cold: a new reader per batch, so each batch also pays for the
  footers of the shards it touches, as the first batch of a job does.
- BatchReader, warm: one reader for all batches, footers already cached, as
  every later batch of an epoch is.

Requests and bytes are counted, not assumed: after the timed pass, the same
batches are read again by fresh readers of each method whose store points at
a counting proxy (counting_proxy.py) in front of the endpoint, and every
request and response byte on the wire is counted, control documents and
HEADs included. The timed pass goes to the endpoint directly, so the proxy
costs no row any time. The BatchReader rows also carry the reader's own
count (`stats.fetch_requests`, `stats.fetched_bytes`: its shard reads only)
beside the proxy's. An https endpoint cannot be counted this way (the proxy
speaks plain HTTP); its rows say so. "x own size" relates bytes fetched per
record to the record's own stored size (the dataset's shard bytes over its
records), so 1.0 would be reading nothing but the records. Each row reports
the median batch of `--batches`; the methods take turns batch by batch, so a
machine busy with other work slows them alike, and garbage is collected
before each batch, so none pays for another's.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, TypedDict

import numpy as np
import signal_dataset as sds

from sds_loader.cli.bench.counting_proxy import CountingProxy
from sds_loader.cli.textfmt import rate, size, table

if TYPE_CHECKING:
    from sds_loader import BatchReader

HEADER = ["method", "records/s", "batch s", "requests/batch", "fetched/record", "x own size", "note"]
RIGHT = [False, True, True, True, True, True, False]


@dataclass
class RemoteRow:
    method: str
    records_per_s: float
    batch_seconds: float
    #: Counted on the wire by the proxy (median batch); None where it could not count.
    requests_per_batch: float | None
    bytes_per_record: float | None
    x_own_size: float | None
    note: str = ""
    #: The reader's own count of its shard reads, for the BatchReader rows.
    reader_requests_per_batch: float | None = None
    reader_bytes_per_record: float | None = None


@dataclass
class RemoteResult:
    uri: str
    records: int
    batch_size: int
    batches: int
    record_bytes: float
    requests_in_flight: int
    rows: list[RemoteRow]
    #: How requests and bytes were counted, or why they were not.
    counted_by: str = ""


def is_remote(path: str | None) -> bool:
    return path is not None and "://" in path and not path.startswith("file://")


#: A method reads one batch; it returns the reader's own (requests, bytes), or None.
Method = Callable[[np.ndarray], "tuple[int, int] | None"]


class _ReaderOptions(TypedDict):
    """The BatchReader arguments every reader of the bench gets."""

    fields: tuple[str, ...] | None
    requests_in_flight: int | None


def _methods(
    uri: str, store: sds.storage.ObjectStore | None, warmup: np.ndarray, options: _ReaderOptions
) -> tuple[list[tuple[str, Method, str]], BatchReader]:
    """The three methods, each opening its readers with `store` (None: signal_dataset's registry)."""
    from sds_loader import BatchReader

    def signal_dataset_batch(ordinals: np.ndarray) -> None:
        sds.open(uri, object_store=store).__getitems__(ordinals.tolist())
        return None

    def cold_batch(ordinals: np.ndarray) -> tuple[int, int]:
        reader = BatchReader(uri, object_store=store, **options)
        reader.read(ordinals)
        _require_native(reader)
        reader.close()
        return reader.stats.fetch_requests, reader.stats.fetched_bytes

    warm_reader = BatchReader(uri, object_store=store, **options)
    warm_reader.read(warmup)
    _require_native(warm_reader)

    def warm_batch(ordinals: np.ndarray) -> tuple[int, int]:
        before = (warm_reader.stats.fetch_requests, warm_reader.stats.fetched_bytes)
        warm_reader.read(ordinals)
        return warm_reader.stats.fetch_requests - before[0], warm_reader.stats.fetched_bytes - before[1]

    methods: list[tuple[str, Method, str]] = [
        ("signal_dataset Dataset.__getitems__", signal_dataset_batch, "stages whole shards"),
        ("BatchReader, cold (new reader per batch)", cold_batch, "footers included"),
        ("BatchReader, warm (footers cached)", warm_batch, ""),
    ]
    return methods, warm_reader


def _counting_endpoint(dataset: sds.Dataset) -> tuple[str | None, str]:
    """(the http:// endpoint to put the proxy in front of, or None; why not, if None)."""
    from signal_dataset.storage import S3ObjectStore

    store = dataset.object_store
    if type(store) is not S3ObjectStore:
        return None, f"not counted: the store is a {type(store).__name__}, not signal_dataset's S3 store"
    endpoint = store.options.endpoint_url
    if not endpoint or not endpoint.startswith("http://"):
        return None, (
            f"not counted: the endpoint {endpoint or 'AWS (https)'} is not plain http://, "
            "which the counting proxy needs"
        )
    return endpoint, ""


def run(
    uri: str,
    *,
    batch_size: int,
    batches: int,
    requests_in_flight: int | None = None,
    fields: tuple[str, ...] | None = None,
    seed: int = 0,
) -> RemoteResult:
    from signal_dataset.storage import S3ObjectStore

    from sds_loader.storage.s3_source import DEFAULT_REQUESTS_IN_FLIGHT

    dataset = sds.open(uri)
    if len(dataset) == 0:
        raise ValueError(f"dataset {uri} holds no records; there is nothing to time")
    instructions = dataset.read_instructions(0, len(dataset))
    shards = dict.fromkeys(instruction.filename for instruction in instructions)
    record_bytes = sum(dataset.object_store.info(name).size for name in shards) / len(dataset)
    rng = np.random.default_rng(seed)
    count = min(batch_size, len(dataset))
    plan = [np.sort(rng.choice(len(dataset), size=count, replace=False)) for _ in range(batches + 1)]
    warmup, timed = plan[0], plan[1:]
    options = _ReaderOptions(fields=fields, requests_in_flight=requests_in_flight)

    methods, warm_reader = _methods(uri, None, warmup, options)
    # The methods take turns batch by batch, so that load from other work on
    # the machine falls on all of them alike and their ratio holds.
    seconds: dict[str, list[float]] = {name: [] for name, _, _ in methods}
    for ordinals in timed:
        for name, method, _ in methods:
            # The garbage a method leaves (a boto3 client is thousands of
            # objects in cycles) is collected here, not inside the next one's time.
            gc.collect()
            started = time.perf_counter()
            method(ordinals)
            seconds[name].append(time.perf_counter() - started)
    warm_reader.close()

    wire: dict[str, list[tuple[int, int]]] = {name: [] for name, _, _ in methods}
    own: dict[str, list[tuple[int, int]]] = {name: [] for name, _, _ in methods}
    endpoint, counted_by = _counting_endpoint(dataset)
    if endpoint is not None:
        with CountingProxy(endpoint) as proxy:
            counted_by = f"a counting proxy in front of {endpoint}, on a second pass over the same batches"
            direct = dataset.object_store
            assert isinstance(direct, S3ObjectStore)  # _counting_endpoint counts S3 stores only
            store = S3ObjectStore(
                options=dataclasses.replace(direct.options, endpoint_url=proxy.url, addressing_style="path")
            )
            counting, counting_warm = _methods(uri, store, warmup, options)
            for ordinals in timed:
                for name, method, _ in counting:
                    before = proxy.counts()
                    reported = method(ordinals)
                    after = proxy.counts()
                    wire[name].append(
                        (after.requests - before.requests, after.body_bytes - before.body_bytes)
                    )
                    if reported is not None:
                        own[name].append(reported)
            counting_warm.close()

    def medians(pairs: list[tuple[int, int]]) -> tuple[float | None, float | None]:
        if not pairs:
            return None, None
        return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs) / count

    rows = []
    for name, _, note in methods:
        middle = statistics.median(seconds[name])
        requests, per_record = medians(wire[name])
        reader_requests, reader_per_record = medians(own[name])
        rows.append(
            RemoteRow(
                method=name,
                records_per_s=count / middle,
                batch_seconds=middle,
                requests_per_batch=requests,
                bytes_per_record=per_record,
                x_own_size=None if per_record is None else per_record / record_bytes,
                note=note if endpoint is not None else f"{note}; {counted_by}".lstrip("; "),
                reader_requests_per_batch=reader_requests,
                reader_bytes_per_record=reader_per_record,
            )
        )
    return RemoteResult(
        uri=uri,
        records=len(dataset),
        batch_size=count,
        batches=batches,
        record_bytes=record_bytes,
        requests_in_flight=requests_in_flight or DEFAULT_REQUESTS_IN_FLIGHT,
        rows=rows,
        counted_by=counted_by,
    )


def _require_native(reader: BatchReader) -> None:
    if reader.stats.native_records == 0:
        raise ValueError(
            f"{reader.uri} is not read natively ({reader.native_unavailable_reason or 'records declined'}); "
            "this benchmark times native ranged reads"
        )


def legend(result: RemoteResult) -> str:
    counted = (
        result.counted_by
        if result.counted_by.startswith("not counted")
        else f"counted by {result.counted_by}"
    )
    return (
        f"{result.uri}: {result.records} records, {size(result.record_bytes)} stored per record "
        "(shard bytes over records, footers included); "
        f"{result.batches} random batches of {result.batch_size} (median shown), "
        f"{result.requests_in_flight} requests in flight; requests and bytes {counted}"
    )


def text(result: RemoteResult) -> str:
    cells = [
        [
            row.method,
            rate(row.records_per_s),
            f"{row.batch_seconds:.3f}",
            "-" if row.requests_per_batch is None else f"{row.requests_per_batch:.0f}",
            "-" if row.bytes_per_record is None else size(row.bytes_per_record),
            "-" if row.x_own_size is None else f"{row.x_own_size:.2f}",
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
