"""`sds-loader bench s3://... --node-cache DIR`: epochs through the node cache against the local disk.

What a node cache is for is the second epoch: the first fetches from the
store (and should fetch no more than a reader without a cache), the second
should fetch nothing and read as fast as the same records on a local disk.
For each order an epoch is read in (`ShardAwareSampler`, announcing ahead,
and a uniform shuffle), this reads:

- without a cache: one epoch, the bytes it fetches the baseline;
- with a new cache under DIR: epoch 1, then epochs 2 to 4, each in another
  order of the same kind, with the same reader (the median epoch reported,
  and the bytes all three fetched);
- a local copy of the dataset (downloaded once, in the page cache as the
  cache's entries are): epochs 2 to 4's orders again, taking turns with them.

Each row gives records/s, the bytes the reader fetched (its own count) and,
where a counter sits on the wire (a `remote.WireCounter`, which every pass
but the local one reads through, shaped if it shapes:
benchmarks/remote_shaped.py), the bytes it saw. The cache's size is what its
directory holds on disk after the last epoch.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import signal_dataset as sds

from sds_loader.cli.bench.remote import SHARD_AWARE, SHUFFLED, WireCounter, shapes, store_at
from sds_loader.cli.textfmt import rate, size, table

if TYPE_CHECKING:
    from sds_loader import BatchReader

HEADER = ["order", "pass", "records/s", "of local", "s", "fetched", "on the wire", "x no cache"]
RIGHT = [False, False, True, True, True, True, True, True]
RUN_LENGTH = 16
#: Epochs after the first read through the cache (and from the local copy),
#: their median reported: one epoch of a small dataset takes a fraction of a
#: second, too short to time once.
LATER = 3


@dataclass
class EpochRow:
    order: str
    name: str
    records: int
    seconds: float
    records_per_s: float
    #: The reader's own count of bytes fetched from the store (0 for the local disk).
    fetched_bytes: int
    #: What the counter on the wire saw pass, or None where none counted.
    wire_bytes: int | None
    #: records_per_s over the local disk's, in the same order.
    of_local: float | None = None
    #: fetched_bytes over the pass without a cache.
    of_uncached: float | None = None


@dataclass
class CacheEpochsResult:
    uri: str
    records: int
    batch_size: int
    shaping: str
    rows: list[EpochRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _download(dataset: sds.Dataset, into: str) -> str:
    """A local copy of every object under the dataset's root; its root."""
    store = dataset.object_store
    root = dataset.root.rstrip("/") + "/"
    listing = getattr(store, "list", None)
    if listing is None:
        raise ValueError(f"the store of {dataset.root} cannot list objects, so no local copy can be made")
    for uri in listing(root):
        path = os.path.join(into, uri[len(root) :])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as out:
            out.write(store.read(uri))
    return into


def _orders(records: int, batch: int) -> list[tuple[str, Callable[[BatchReader, int], Iterator[int]]]]:
    """The orders to read epochs in: ShardAwareSampler's (where torch is installed) and shuffled."""

    def shuffled(reader: BatchReader, seed: int) -> Iterator[int]:
        return iter(np.random.default_rng(seed).permutation(records).tolist())

    try:
        from sds_loader.samplers.shard_aware import ShardAwareSampler
    except ImportError:  # torch is an optional dependency
        return [(SHUFFLED, shuffled)]
    runs_mixed = max(1, batch // RUN_LENGTH)

    def shard_aware(reader: BatchReader, seed: int) -> Iterator[int]:
        return iter(ShardAwareSampler(reader, seed=seed, run_length=RUN_LENGTH, runs_mixed=runs_mixed))

    return [(SHARD_AWARE, shard_aware), (SHUFFLED, shuffled)]


def _median(rows: list[EpochRow]) -> EpochRow:
    return sorted(rows, key=lambda row: row.seconds)[len(rows) // 2]


def _epoch(reader: BatchReader, order: Iterator[int], records: int, batch: int) -> float:
    started = time.perf_counter()
    left = records
    while left > 0:
        reader.read([next(order) for _ in range(min(batch, left))])
        left -= min(batch, left)
    return time.perf_counter() - started


def run(
    uri: str,
    *,
    cache_dir: str,
    batch_size: int,
    requests_in_flight: int | None = None,
    endpoint: str | None = None,
    counter: WireCounter | None = None,
    seed: int = 0,
) -> CacheEpochsResult:
    """Epochs without a cache, through a new cache under `cache_dir` (1 and 2), and from a local
    copy; through `endpoint` (None: the store's own), or through `counter`, which counts."""
    from sds_loader import BatchReader

    direct = store_at(uri, endpoint) if endpoint is not None else None
    dataset = sds.open(uri, object_store=direct)
    records = len(dataset)
    if records == 0:
        raise ValueError(f"dataset {uri} holds no records; there is nothing to time")
    shaping = (
        f"through a proxy adding {counter.latency_ms:g} ms and pacing each connection to "
        f"{'unlimited' if counter.bandwidth is None else f'{counter.bandwidth / 1e6:g} MB/s'}"
        if counter is not None and shapes(counter)
        else "through a proxy that counts"
        if counter is not None
        else f"straight to {endpoint or 'the endpoint'} (not counted on the wire)"
    )
    result = CacheEpochsResult(uri=uri, records=records, batch_size=batch_size, shaping=shaping)
    store = store_at(uri, counter.url) if counter is not None else direct
    os.makedirs(cache_dir, exist_ok=True)
    local_dir = tempfile.mkdtemp(prefix="sds-loader-bench-local-")
    try:
        local = _download(dataset, local_dir)
        for order_name, order in _orders(records, batch_size):

            def timed(reader: BatchReader, epoch_seed: int, name: str) -> EpochRow:
                before_wire = counter.counts().body_bytes if counter is not None else 0
                before = reader.stats.fetched_bytes
                seconds = _epoch(reader, order(reader, epoch_seed), records, batch_size)
                wire = counter.counts().body_bytes - before_wire if counter is not None else None
                return EpochRow(
                    order=order_name,
                    name=name,
                    records=records,
                    seconds=seconds,
                    records_per_s=records / seconds,
                    fetched_bytes=reader.stats.fetched_bytes - before,
                    wire_bytes=wire,
                )

            uncached = timed(
                BatchReader(uri, object_store=store, requests_in_flight=requests_in_flight), seed, "no cache"
            )
            directory = os.path.join(cache_dir, f"bench-{len(result.rows) // 4}-{os.getpid()}")
            shutil.rmtree(directory, ignore_errors=True)
            try:
                reader = BatchReader(
                    uri, object_store=store, cache_dir=directory, requests_in_flight=requests_in_flight
                )
                first = timed(reader, seed, "cache, epoch 1")
                # Epochs 2 to LATER + 1 and the local disk in the same orders,
                # taking turns, so that a machine busy with other work slows
                # both alike; each row is the median epoch.
                local_reader = BatchReader(local)
                later, disks = [], []
                for epoch in range(LATER):
                    later.append(timed(reader, seed + 1 + epoch, "cache, epoch 2"))
                    disks.append(timed(local_reader, seed + 1 + epoch, "local disk"))
                reader.close()
                cached_bytes = _bytes_under(directory)
            finally:
                shutil.rmtree(directory, ignore_errors=True)
            second = _median(later)
            second.fetched_bytes = sum(row.fetched_bytes for row in later)
            wires = [row.wire_bytes for row in later]
            second.wire_bytes = None if None in wires else sum(w or 0 for w in wires)
            if LATER > 1:
                second.name = f"cache, epochs 2-{LATER + 1}"
            disk = _median(disks)
            disk.wire_bytes = None
            for row in (uncached, first, second):
                row.of_local = row.records_per_s / disk.records_per_s
                row.of_uncached = (
                    row.fetched_bytes / uncached.fetched_bytes if uncached.fetched_bytes else None
                )
            result.rows += [uncached, first, second, disk]
            result.notes.append(
                f"{order_name}: the cache's directory held {size(cached_bytes)} after the last epoch"
            )
    finally:
        shutil.rmtree(local_dir, ignore_errors=True)
    return result


def _bytes_under(directory: str) -> int:
    """The bytes of the files under `directory`, as the disk holds them."""
    return sum(
        os.path.getsize(os.path.join(folder, name))
        for folder, _, names in os.walk(directory)
        for name in names
    )


def text(result: CacheEpochsResult) -> str:
    rows = [
        [
            row.order,
            row.name,
            rate(row.records_per_s),
            "" if row.of_local is None else f"{row.of_local:.0%}",
            f"{row.seconds:.2f}",
            size(row.fetched_bytes),
            "" if row.wire_bytes is None else size(row.wire_bytes),
            "" if row.of_uncached is None else f"{row.of_uncached:.3f}",
        ]
        for row in result.rows
    ]
    lines = [
        f"{result.uri}: {result.records} records, batches of {result.batch_size}, {result.shaping}",
        table(HEADER, rows, right=RIGHT),
        *result.notes,
    ]
    return "\n".join(lines)


def write(result: CacheEpochsResult, out: str) -> str:
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "bench-node-cache.json")
    with open(path, "w") as handle:
        json.dump(asdict(result), handle, indent=2)
    return path
