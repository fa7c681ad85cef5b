"""`sds-loader bench s3://...`: reads from object storage, in time, requests and bytes.

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

Then a stretch of an epoch (`stretch` records, 1,024 by default) is read in
batches by a warm reader twice: in `ShardAwareSampler` order, the sampler
announcing upcoming records to the reader's `will_need` as it does under a
DataLoader (so the reader fetches them ahead on its background thread), and
in a uniformly shuffled order. Each of these warm rows also reports the CPU
time of the reading process (all its threads) per request it sent.

Every reader reads through `endpoint` (the store's own when None), which a
user points at their own store, or at a proxy that models a distant one.
The BatchReader rows carry the reader's own count (`stats.fetch_requests`,
`stats.fetched_bytes`: its shard reads only). Requests and bytes on the
wire, control documents and HEADs included (and signal_dataset's, which
has no counters), are counted where a `WireCounter` is given: an HTTP
proxy between the readers and the store (benchmarks/shaping_proxy.py, which
benchmarks/remote_shaped.py starts). A counter that shapes (latency,
bandwidth) is read through in the timed pass and counts that pass; one that
only counts is read through on a second pass over the same batches, so that
it costs no row any time. What the warm reader's requests cost in CPU
is its process's CPU time less the stages that decode (`ReadStats.stage_seconds`).
"x own size" relates bytes fetched per record to the record's own stored
size (the dataset's shard bytes over its records), so 1.0 would be reading
nothing but the records. Each batch row reports the median batch of
`--batches`; the methods take turns batch by batch, so a machine busy with
other work slows them alike, and garbage is collected before each batch, so
none pays for another's.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Protocol, TypedDict

import numpy as np
import signal_dataset as sds

from sds_loader.cli.textfmt import rate, size, table

if TYPE_CHECKING:
    from signal_dataset.storage import S3ObjectStore

    from sds_loader import BatchReader, ReadStats

HEADER = ["method", "records/s", "batch s", "requests/batch", "fetched/record", "x own size", "note"]
RIGHT = [False, True, True, True, True, True, False]
STRETCH_HEADER = ["stretch order", "records/s", "s", "requests", "fetched/record", "CPU ms/request", "note"]
STRETCH_RIGHT = [False, True, True, True, True, True, False]

#: Records of an epoch the stretch rows read (fewer if the dataset holds fewer).
STRETCH = 1024
#: ShardAwareSampler's run length in the stretch rows (its default).
RUN_LENGTH = 16


@dataclass
class RemoteRow:
    method: str
    records_per_s: float
    batch_seconds: float
    #: Counted on the wire by the counter (median batch); None where none counted.
    requests_per_batch: float | None
    bytes_per_record: float | None
    x_own_size: float | None
    note: str = ""
    #: The reader's own count of its shard reads, for the BatchReader rows.
    reader_requests_per_batch: float | None = None
    reader_bytes_per_record: float | None = None
    #: CPU seconds of the reading process per request, for the warm row.
    cpu_seconds_per_request: float | None = None


@dataclass
class StretchRow:
    """A warm reader reading `records` records of an epoch in batches, in one order."""

    order: str
    records: int
    seconds: float
    records_per_s: float
    #: Counted on the wire by the counter; None where none counted.
    requests: int | None
    bytes_per_record: float | None
    #: The reader's own count of its shard reads (readahead included).
    reader_requests: int
    reader_bytes_per_record: float
    #: CPU seconds of the reading process (all threads) over the requests sent:
    #: the counter's count where it counted this pass, else the reader's own.
    cpu_seconds_per_request: float | None
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
    #: How requests and bytes were counted, or why they were not.
    counted_by: str = ""
    #: The store the counter modelled; None: the endpoint as it is.
    latency_ms: float | None = None
    bandwidth_bytes_per_s: float | None = None
    stretch_rows: list[StretchRow] = field(default_factory=list)
    #: Why there are no stretch rows, if there are none.
    stretch_note: str = ""
    #: Speed and cost ratios: BatchReader over signal_dataset, ShardAwareSampler over shuffled.
    ratios: dict[str, float] = field(default_factory=dict)
    #: CPU seconds per request of the warm reader outside the stages that decode.
    fetch_cpu_seconds_per_request: float | None = None


def is_remote(path: str | None) -> bool:
    return path is not None and "://" in path and not path.startswith("file://")


#: A method reads one batch; it returns the reader's own (requests, bytes), or None.
Method = Callable[[np.ndarray], "tuple[int, int] | None"]


class WireCounts(Protocol):
    """What a counter saw pass so far."""

    @property
    def requests(self) -> int: ...
    #: Bytes of response bodies (a GET's data; a HEAD's none), as `stats.fetched_bytes` counts them.
    @property
    def body_bytes(self) -> int: ...


class WireCounter(Protocol):
    """An HTTP endpoint in front of the store that counts what passes, and may shape it.

    benchmarks/shaping_proxy.py's `BenchProxy` is one: readers pointed at
    `url` reach the store through it.
    """

    @property
    def url(self) -> str: ...
    #: Each answer's first byte held this long after its request (0: not held).
    @property
    def latency_ms(self) -> float: ...
    #: Bytes/s each connection is paced to; None: not paced.
    @property
    def bandwidth(self) -> float | None: ...
    def counts(self) -> WireCounts: ...


class _ReaderOptions(TypedDict):
    """The BatchReader arguments every reader of the bench gets."""

    fields: tuple[str, ...] | None
    requests_in_flight: int | None


SIGNAL_DATASET = "signal_dataset Dataset.__getitems__"
COLD = "BatchReader, cold (new reader per batch)"
WARM = "BatchReader, warm (footers cached)"
SHARD_AWARE = "ShardAwareSampler, will_need"
SHUFFLED = "shuffled"


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
        (SIGNAL_DATASET, signal_dataset_batch, "stages whole shards"),
        (COLD, cold_batch, "footers included"),
        (WARM, warm_batch, ""),
    ]
    return methods, warm_reader


@dataclass
class _Pass:
    """What one pass over the batches measured, per method."""

    seconds: dict[str, list[float]]
    wire: dict[str, list[tuple[int, int]]]
    own: dict[str, list[tuple[int, int]]]
    cpu: dict[str, list[float]]
    #: CPU seconds per request of the warm reader fetching the batches' chunks without decoding.
    fetch_cpu: float | None = None


def _batch_pass(
    uri: str,
    store: sds.storage.ObjectStore | None,
    warmup: np.ndarray,
    timed: list[np.ndarray],
    options: _ReaderOptions,
    counter: WireCounter | None,
) -> _Pass:
    """Every method reads every batch, taking turns; `counter` (the store points at it) counts."""
    methods, warm_reader = _methods(uri, store, warmup, options)
    warm_before = warm_reader.stats.snapshot()
    names = [name for name, _, _ in methods]
    measured = _Pass(*({name: [] for name in names} for _ in range(4)))  # type: ignore[arg-type]
    try:
        for ordinals in timed:
            for name, method, _ in methods:
                # The garbage a method leaves (a boto3 client is thousands of
                # objects in cycles) is collected here, not inside the next one's time.
                gc.collect()
                before = counter.counts() if counter is not None else None
                cpu = time.process_time()
                started = time.perf_counter()
                reported = method(ordinals)
                measured.seconds[name].append(time.perf_counter() - started)
                measured.cpu[name].append(time.process_time() - cpu)
                if counter is not None and before is not None:
                    after = counter.counts()
                    measured.wire[name].append(
                        (after.requests - before.requests, after.body_bytes - before.body_bytes)
                    )
                if reported is not None:
                    measured.own[name].append(reported)
        measured.fetch_cpu = _cpu_per_request_outside_decoding(
            sum(measured.cpu[WARM]), warm_reader.stats.snapshot() - warm_before
        )
    finally:
        warm_reader.close()
    return measured


#: The stages of a read that decode what was fetched (`ReadStats.stage_seconds`).
DECODING = ("hash", "decompress", "parse", "copy")


def _cpu_per_request_outside_decoding(cpu: float, warm: ReadStats) -> float | None:
    """CPU seconds per request of the warm reads, less their decoding: what the requests cost.

    `cpu` is the reading process's CPU time (all its threads) over the warm
    batches and `warm` the warm reader's stats over the same batches; the
    stages that decode are CPU work on the reader's threads, so what is left
    is sending the requests and taking in their answers (and the Python
    around a read, which a warm batch keeps small). None when no request was
    sent, or when decoding took all of it (the stage times are sampled, so
    on a tiny pass they can exceed it).
    """
    stages = warm.stage_seconds
    left = cpu - sum(stages[name] for name in DECODING)
    if warm.fetch_requests == 0 or left <= 0:
        return None
    return left / warm.fetch_requests


def _shard_firsts(dataset: sds.Dataset) -> np.ndarray:
    """The first ordinal of each shard: a batch of them opens every shard."""
    firsts: dict[str, int] = {}
    for instruction in dataset.read_instructions(0, len(dataset)):
        firsts.setdefault(instruction.filename, instruction.first_ordinal)
    return np.array(sorted(firsts.values()), dtype=np.int64)


@dataclass
class _StretchRun:
    seconds: float
    cpu: float
    wire: tuple[int, int] | None
    own: tuple[int, int]


def _stretch_orders(
    uri: str, records: int, batch: int, length: int, seed: int
) -> tuple[list[tuple[str, Callable[[BatchReader], Iterator[int]], str]], str]:
    """(the stretch rows' orders, each a function of the reader to iterate; why none, if none)."""
    try:
        from sds_loader.samplers.shard_aware import ShardAwareSampler
    except ImportError as error:  # torch is an optional dependency
        return [], f"no stretch rows: ShardAwareSampler needs torch ({error})"
    runs_mixed = max(1, batch // RUN_LENGTH)

    def shard_aware(reader: BatchReader) -> Iterator[int]:
        # The sampler takes the reader's will_need and announces each stretch
        # of run_length * runs_mixed records (about a batch) two stretches
        # ahead, as it does for SDSTorchDataset under a DataLoader.
        sampler = ShardAwareSampler(reader, seed=seed, run_length=RUN_LENGTH, runs_mixed=runs_mixed)
        return iter(sampler)

    def shuffled(reader: BatchReader) -> Iterator[int]:
        return iter(np.random.default_rng(seed).permutation(records).tolist())

    return [
        (
            SHARD_AWARE,
            shard_aware,
            f"runs of {RUN_LENGTH} mixed by {runs_mixed}, announced ahead",
        ),
        (SHUFFLED, shuffled, "uniform permutation, nothing announced"),
    ], ""


def _stretch_pass(
    uri: str,
    store: sds.storage.ObjectStore | None,
    orders: list[tuple[str, Callable[[BatchReader], Iterator[int]], str]],
    opening: np.ndarray,
    batch: int,
    length: int,
    options: _ReaderOptions,
    counter: WireCounter | None,
) -> dict[str, _StretchRun]:
    """Each order: a new reader opens every shard, then reads `length` records of its order in batches."""
    from sds_loader import BatchReader

    runs: dict[str, _StretchRun] = {}
    for name, order, _ in orders:
        reader = BatchReader(uri, object_store=store, **options)
        try:
            reader.read(opening)
            _require_native(reader)
            gc.collect()
            own = (reader.stats.fetch_requests, reader.stats.fetched_bytes)
            before = counter.counts() if counter is not None else None
            cpu = time.process_time()
            started = time.perf_counter()
            ordinals = order(reader)
            left = length
            while left > 0:
                chunk = [next(ordinals) for _ in range(min(batch, left))]
                reader.read(chunk)
                left -= len(chunk)
            seconds = time.perf_counter() - started
            used = time.process_time() - cpu
            wire = None
            if counter is not None and before is not None:
                after = counter.counts()
                wire = (after.requests - before.requests, after.body_bytes - before.body_bytes)
            runs[name] = _StretchRun(
                seconds=seconds,
                cpu=used,
                wire=wire,
                own=(reader.stats.fetch_requests - own[0], reader.stats.fetched_bytes - own[1]),
            )
        finally:
            reader.close()
    return runs


def store_at(uri: str, url: str) -> S3ObjectStore:
    """The S3 store signal_dataset would open `uri` with (its region, credentials, retries),
    sending its requests to `url` instead: a user's own endpoint, or a proxy in front of one."""
    from signal_dataset.storage import S3ObjectStore, S3Options, object_store_for

    if not uri.startswith("s3://"):
        raise ValueError(f"--endpoint points an S3 store elsewhere, and {uri} is not in S3 (s3://...)")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"--endpoint {url!r} is not a URL; give one such as http://127.0.0.1:9000")
    registered = object_store_for(uri)
    options = registered.options if isinstance(registered, S3ObjectStore) else S3Options()
    return S3ObjectStore(
        options=dataclasses.replace(
            options, endpoint_url=url, addressing_style=options.addressing_style or "path"
        )
    )


def shapes(counter: WireCounter | None) -> bool:
    """Whether reading through `counter` models a distant store (and so is the timed pass)."""
    return counter is not None and (counter.latency_ms > 0 or counter.bandwidth is not None)


#: Why a run without a counter has no counts on the wire.
NOT_COUNTED = (
    "not counted on the wire: the BatchReader rows are the readers' own counts, shard reads only "
    "(benchmarks/remote_shaped.py counts every request through a proxy)"
)


def run(
    uri: str,
    *,
    batch_size: int,
    batches: int,
    requests_in_flight: int | None = None,
    fields: tuple[str, ...] | None = None,
    seed: int = 0,
    endpoint: str | None = None,
    counter: WireCounter | None = None,
    stretch: int = STRETCH,
) -> RemoteResult:
    """Time and count the batch rows and the stretch rows, every reader reading through
    `endpoint` (None: the store's own); `counter`, where given, counts on the wire (module
    docstring)."""
    from sds_loader.storage.s3_source import DEFAULT_REQUESTS_IN_FLIGHT

    direct = store_at(uri, endpoint) if endpoint is not None else None
    dataset = sds.open(uri, object_store=direct)
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
    length = min(stretch, len(dataset))
    orders, stretch_note = _stretch_orders(uri, len(dataset), count, length, seed)
    opening = _shard_firsts(dataset)

    shaped = shapes(counter)
    if counter is None:
        counted_by = NOT_COUNTED
        measured = _batch_pass(uri, direct, warmup, timed, options, None)
        stretches = _stretch_pass(uri, direct, orders, opening, count, length, options, None)
        counted, counted_stretches = measured, {}
    elif shaped:
        through = store_at(uri, counter.url)
        counted_by = f"the proxy at {counter.url}, in the timed pass"
        measured = _batch_pass(uri, through, warmup, timed, options, counter)
        stretches = _stretch_pass(uri, through, orders, opening, count, length, options, counter)
        counted, counted_stretches = measured, stretches
    else:
        through = store_at(uri, counter.url)
        counted_by = f"the proxy at {counter.url}, on a second pass over the same batches"
        measured = _batch_pass(uri, direct, warmup, timed, options, None)
        stretches = _stretch_pass(uri, direct, orders, opening, count, length, options, None)
        counted = _batch_pass(uri, through, warmup, timed, options, counter)
        counted_stretches = _stretch_pass(uri, through, orders, opening, count, length, options, counter)

    def medians(pairs: list[tuple[int, int]]) -> tuple[float | None, float | None]:
        if not pairs:
            return None, None
        return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs) / count

    rows = []
    for name, note in ((SIGNAL_DATASET, "stages whole shards"), (COLD, "footers included"), (WARM, "")):
        middle = statistics.median(measured.seconds[name])
        requests, per_record = medians(counted.wire[name])
        reader_requests, reader_per_record = medians(counted.own[name])
        if counter is None:
            whose = "the reader's own count" if name != SIGNAL_DATASET else "not counted"
            note = f"{note}; {whose}".lstrip("; ")
        fetched = per_record if per_record is not None else reader_per_record
        cpu_per_request = None
        if name == WARM:
            # The timed pass's own requests: the proxy's count when it counted
            # that pass (shaped), else the reader's, which for a warm reader agree.
            sent = sum(p[0] for p in (measured.wire[name] or measured.own[name]))
            cpu_per_request = sum(measured.cpu[name]) / sent if sent else None
        rows.append(
            RemoteRow(
                method=name,
                records_per_s=count / middle,
                batch_seconds=middle,
                requests_per_batch=requests,
                bytes_per_record=per_record,
                x_own_size=None if fetched is None else fetched / record_bytes,
                note=note,
                reader_requests_per_batch=reader_requests,
                reader_bytes_per_record=reader_per_record,
                cpu_seconds_per_request=cpu_per_request,
            )
        )

    stretch_rows = []
    for name, _, note in orders:
        timed_run = stretches[name]
        wire = counted_stretches[name].wire if name in counted_stretches else None
        own = (counted_stretches[name] if name in counted_stretches else timed_run).own
        sent = timed_run.wire[0] if timed_run.wire is not None else timed_run.own[0]
        stretch_rows.append(
            StretchRow(
                order=name,
                records=length,
                seconds=timed_run.seconds,
                records_per_s=length / timed_run.seconds,
                requests=None if wire is None else wire[0],
                bytes_per_record=None if wire is None else wire[1] / length,
                reader_requests=own[0],
                reader_bytes_per_record=own[1] / length,
                cpu_seconds_per_request=timed_run.cpu / sent if sent else None,
                note=note,
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
        latency_ms=counter.latency_ms if counter is not None and shaped else None,
        bandwidth_bytes_per_s=counter.bandwidth if counter is not None and shaped else None,
        stretch_rows=stretch_rows,
        stretch_note=stretch_note,
        ratios=_ratios(rows, stretch_rows),
        fetch_cpu_seconds_per_request=measured.fetch_cpu,
    )


def _ratios(rows: list[RemoteRow], stretch_rows: list[StretchRow]) -> dict[str, float]:
    """BatchReader over signal_dataset (new reader, warm reader); ShardAwareSampler over shuffled."""
    by_name = {row.method: row for row in rows}
    ratios: dict[str, float] = {}
    staged = by_name[SIGNAL_DATASET]
    for label, name in (("new reader per batch", COLD), ("warm reader", WARM)):
        ours = by_name[name]
        prefix = f"{label}: BatchReader / signal_dataset (opened per batch)"
        ratios[f"{prefix}, records/s"] = ours.records_per_s / staged.records_per_s
        if ours.bytes_per_record is not None and staged.bytes_per_record:
            ratios[f"{prefix}, bytes"] = ours.bytes_per_record / staged.bytes_per_record
        if ours.requests_per_batch is not None and staged.requests_per_batch:
            ratios[f"{prefix}, requests"] = ours.requests_per_batch / staged.requests_per_batch
    orders = {row.order: row for row in stretch_rows}
    if SHARD_AWARE in orders and SHUFFLED in orders:
        aware, shuffled = orders[SHARD_AWARE], orders[SHUFFLED]
        prefix = "stretch: ShardAwareSampler / shuffled"
        ratios[f"{prefix}, records/s"] = aware.records_per_s / shuffled.records_per_s
        if aware.requests is not None and shuffled.requests:
            ratios[f"{prefix}, requests"] = aware.requests / shuffled.requests
        else:
            own = aware.reader_requests / max(1, shuffled.reader_requests)
            ratios[f"{prefix}, reader's own requests"] = own
    return ratios


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
    shaped = ""
    if result.latency_ms is not None or result.bandwidth_bytes_per_s is not None:
        pace = (
            "unpaced"
            if result.bandwidth_bytes_per_s is None
            else f"{result.bandwidth_bytes_per_s / 1e6:g} MB/s per connection"
        )
        shaped = (
            f"; every read goes through a shaping proxy: {result.latency_ms or 0:g} ms to first byte, {pace}"
        )
    return (
        f"{result.uri}: {result.records} records, {size(result.record_bytes)} stored per record "
        "(shard bytes over records, footers included); "
        f"{result.batches} random batches of {result.batch_size} (median shown), "
        f"{result.requests_in_flight} requests in flight; requests and bytes {counted}{shaped}"
    )


def text(result: RemoteResult) -> str:
    cells = [
        [
            row.method,
            rate(row.records_per_s),
            f"{row.batch_seconds:.3f}",
            _either(row.requests_per_batch, row.reader_requests_per_batch, lambda n: f"{n:.0f}"),
            _either(row.bytes_per_record, row.reader_bytes_per_record, size),
            "-" if row.x_own_size is None else f"{row.x_own_size:.2f}",
            row.note
            if row.cpu_seconds_per_request is None
            else f"{row.note}; {row.cpu_seconds_per_request * 1e3:.2f} ms CPU/request".lstrip("; "),
        ]
        for row in result.rows
    ]
    parts = [table(HEADER, cells, right=RIGHT)]
    if result.stretch_rows:
        first = result.stretch_rows[0]
        parts.append(
            f"A warm reader reads {first.records:,} records of an epoch in batches of {result.batch_size}:"
        )
        parts.append(
            table(
                STRETCH_HEADER,
                [
                    [
                        row.order,
                        rate(row.records_per_s),
                        f"{row.seconds:.3f}",
                        f"{row.reader_requests}" if row.requests is None else f"{row.requests}",
                        size(
                            row.reader_bytes_per_record
                            if row.bytes_per_record is None
                            else row.bytes_per_record
                        ),
                        "-"
                        if row.cpu_seconds_per_request is None
                        else f"{row.cpu_seconds_per_request * 1e3:.2f}",
                        row.note if row.requests is not None else f"{row.note}; reader's own count",
                    ]
                    for row in result.stretch_rows
                ],
                right=STRETCH_RIGHT,
            )
        )
    elif result.stretch_note:
        parts.append(result.stretch_note)
    if result.fetch_cpu_seconds_per_request is not None:
        parts.append(
            "warm reader, CPU per request outside decoding (less its hash, decompress, parse "
            f"and copy stages): {result.fetch_cpu_seconds_per_request * 1e6:.0f} us"
        )
    if result.ratios:
        parts.append("\n".join(f"{name}: {value:.2f}x" for name, value in result.ratios.items()))
    return "\n\n".join(parts)


def _either(wire: float | None, own: float | None, shown: Callable[[float], str]) -> str:
    """The count on the wire, else the reader's own, else "-"."""
    value = wire if wire is not None else own
    return "-" if value is None else shown(value)


def write(result: RemoteResult, out: str) -> str:
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "bench-remote.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"format": "sds-loader-bench-remote/2", **asdict(result)}, handle, indent=2)
    return path
