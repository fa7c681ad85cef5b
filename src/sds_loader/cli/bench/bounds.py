"""The ceilings a reader of these shards cannot beat on one core.

A zstd shard cannot be read faster than its chunks decompress; an uncompressed
one cannot be read faster than its bytes are copied once. Both are timed by
the native extension on the very chunks and records of the plan's batches,
with the GIL released and no Python between buffers, so that "% of bound" in
the table says how much of the achievable speed a method reaches.

The inputs of a whole pass are gathered first, outside the timed call, and
timed in one call (several past MAX_GATHER_BYTES, to bound memory). Timing
batch by batch with repeats would copy the same few megabytes over and over
from the CPU cache and report a bound no reader of a real dataset meets; a
pass larger than the cache is copied from memory, as a reader's is. Only a
pass too small to time (a test's) is repeated.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import signal_dataset as sds

from sds_loader.cli import native_tools
from sds_loader.cli.bench.plan import COMPRESSED, Plan
from sds_loader.cli.bench.timing import Runner, Skip

#: Gathered inputs timed per native call, at most (the call copies them once more).
MAX_GATHER_BYTES = 512 << 20
#: Shortest native call timed; shorter ones are repeated up to MAX_REPEATS.
MIN_CALL_SECONDS = 0.02
MAX_REPEATS = 64


def batch_payloads(table: Any, payloads: Any, batch: np.ndarray) -> list[Any]:
    """The compressed payloads `bound_decompress` takes for `batch`, from `chunk_payloads`.

    A chunk of several records is decompressed once per batch, as the reader
    does; with one record per chunk nothing is dropped here.
    """
    files, locals_ = table.locate(batch)
    unique: dict[tuple[str, bytes], Any] = {}
    for file in np.unique(files).tolist():
        for payload in payloads(table.paths[file], locals_[files == file].tolist()):
            unique.setdefault((payload[0], payload[1]), payload)
    return list(unique.values())


class _Bound(Runner):
    def __init__(self, plan: Plan) -> None:
        from sds_loader.dataset import shard_table

        if plan.shards_unavailable:
            raise Skip(f"skipped: {plan.shards_unavailable}")
        self.table = shard_table(sds.open(plan.uri))
        self.elapsed = 0.0

    def _groups(self, batch: np.ndarray) -> Iterator[tuple[str, list[int]]]:
        files, locals_ = self.table.locate(batch)
        for file in np.unique(files).tolist():
            yield self.table.paths[file], locals_[files == file].tolist()

    def gather(self, batch: np.ndarray) -> list[Any]:
        raise NotImplementedError

    def time_call(self, items: list[Any], repeats: int) -> float:
        raise NotImplementedError

    def run(self, batches: Sequence[np.ndarray]) -> Iterator[int]:
        self.elapsed = 0.0
        pending: list[Any] = []
        pending_bytes = 0
        for batch in batches:
            items = self.gather(batch)
            pending.extend(items)
            pending_bytes += sum(self.size_of(item) for item in items)
            if pending_bytes >= MAX_GATHER_BYTES:
                self.elapsed += self._timed(pending)
                pending, pending_bytes = [], 0
            yield batch.size
        if pending:
            self.elapsed += self._timed(pending)

    def _timed(self, items: list[Any]) -> float:
        once = self.time_call(items, 1)
        if once >= MIN_CALL_SECONDS:
            return once
        repeats = max(2, min(MAX_REPEATS, math.ceil(MIN_CALL_SECONDS / max(once, 1e-9))))
        return self.time_call(items, repeats) / repeats

    def size_of(self, item: Any) -> int:
        raise NotImplementedError

    def timed_seconds(self) -> float | None:
        return self.elapsed


class _Decompress(_Bound):
    def __init__(self, plan: Plan) -> None:
        if plan.compression is not None and plan.compression not in COMPRESSED:
            raise Skip("skipped: shards are uncompressed, nothing to decompress")
        reason = native_tools.unavailable_reason("chunk_payloads", "bound_decompress", short=True)
        if reason:
            raise Skip(f"skipped: {reason}")
        super().__init__(plan)
        self.compression = plan.compression
        self.batch_rows = max((batch.size for batch in plan.batches), default=1)
        self.payloads = native_tools.function("chunk_payloads")
        self.decompress = native_tools.function("bound_decompress")

    def gather(self, batch: np.ndarray) -> list[Any]:
        return batch_payloads(self.table, self.payloads, batch)

    def size_of(self, item: tuple[str, bytes, int]) -> int:
        return len(item[1])

    def time_call(self, items: list[Any], repeats: int) -> float:
        return float(self.decompress(items, repeats, self.batch_rows))

    def note(self) -> str:
        return f"one core, {self.compression} decompression only, into the batch's rows"


class _Memcpy(_Bound):
    """Copies each record's decoded bytes once into a scratch buffer."""

    def __init__(self, plan: Plan) -> None:
        from array_record.python.array_record_module import ArrayRecordReader

        from sds_loader.cli.bench.methods import ARRAY_RECORD_OPTIONS

        super().__init__(plan)
        self.readers = [ArrayRecordReader(path, ARRAY_RECORD_OPTIONS) for path in self.table.paths]
        self.native_reason = native_tools.unavailable_reason("bound_memcpy", short=True)
        self.copy = None if self.native_reason else native_tools.function("bound_memcpy")

    def gather(self, batch: np.ndarray) -> list[Any]:
        files, locals_ = self.table.locate(batch)
        buffers: list[bytes] = []
        for file in np.unique(files).tolist():
            buffers.extend(bytes(value) for value in self.readers[file].read(locals_[files == file].tolist()))
        return buffers

    def size_of(self, item: bytes) -> int:
        return len(item)

    def time_call(self, items: list[Any], repeats: int) -> float:
        if self.copy is not None:
            return float(self.copy(items, repeats))
        # Without the extension: the same copies through numpy, which is a
        # memcpy per buffer plus a little call overhead.
        scratch = np.empty(sum(len(item) for item in items), dtype=np.uint8)
        views = [np.frombuffer(item, dtype=np.uint8) for item in items]
        started = time.perf_counter()
        for _ in range(repeats):
            at = 0
            for view in views:
                scratch[at : at + view.size] = view
                at += view.size
        return time.perf_counter() - started

    def note(self) -> str:
        return "one core" if self.copy is not None else f"one core, numpy copies ({self.native_reason})"

    def close(self) -> None:
        for reader in self.readers:
            reader.close()


class _Read(_Bound):
    """Reads each chunk as a reader at its fastest would, natively on one core,
    through the reader's own chunk code: one preadv with the block headers set
    aside, the chunk's frame checked and, when `hash`, its data hash, the record
    sizes parsed, then zstd one-shot into the row (stored values: copied there).
    No record is decoded. What verification and the read itself leave of the
    decompression or memcpy bound, measured in the same run."""

    def __init__(self, plan: Plan, *, hash: bool) -> None:
        if plan.compression is not None and plan.compression not in ("zstd", "none"):
            raise Skip("skipped: timed for zstd and uncompressed shards only")
        reason = native_tools.unavailable_reason("chunk_extents", "bound_read", short=True)
        if reason:
            raise Skip(f"skipped: {reason}")
        super().__init__(plan)
        self.hash = hash
        self.compression = plan.compression
        self.batch_rows = max((batch.size for batch in plan.batches), default=1)
        self.extents = native_tools.function("chunk_extents")
        self.read = native_tools.function("bound_read")

    def gather(self, batch: np.ndarray) -> list[Any]:
        # A chunk is read once per batch however many of its records it holds.
        unique: dict[tuple[str, int], tuple[Any, ...]] = {}
        for path, records in self._groups(batch):
            for item in self.extents(path, records):
                unique.setdefault((item[0], item[3]), item)
        return list(unique.values())

    def size_of(self, item: tuple[Any, ...]) -> int:
        return int(item[2])

    def time_call(self, items: list[Any], repeats: int) -> float:
        return float(self.read(items, repeats, self.hash, self.batch_rows))

    def note(self) -> str:
        hashed = " + HighwayHash" if self.hash else ""
        if self.compression == "none":
            return f"one core, the reader's chunk code: preadv{hashed}, copy into the row"
        return f"one core, the reader's chunk code: preadv{hashed} + zstd one-shot into the row"


def verified_read(plan: Plan) -> Runner:
    return _Read(plan, hash=True)


def unverified_read(plan: Plan) -> Runner:
    return _Read(plan, hash=False)


def decompress(plan: Plan) -> Runner:
    return _Decompress(plan)


def memcpy(plan: Plan) -> Runner:
    return _Memcpy(plan)
