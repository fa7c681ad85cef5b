"""`SDSDatasource`: a Ray Data datasource whose read tasks are stretches of SDS shards.

The driver opens the dataset once, to learn what a block holds (by reading
record 0) and where each shard's records begin; it then closes its reader
and keeps only that: the shard table's starts and file numbers, a few bytes a
shard. `get_read_tasks` cuts the ordinals into stretches along the shards
(`sds_loader.ray.stretches`) and hands Ray one task per stretch, with its
exact row count, its size and its shard files in the task's metadata. A task
captures only its reader's options and two ordinals: in its worker it opens
the reader (`sds_loader.ray.worker_readers`) and reads its stretch in reads of
about Ray's target block size, each into memory an earlier one left
(`sds_loader.ray.reused_blocks`) and each one an Arrow table
(`sds_loader.ray.blocks`).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from ray.data import DataContext
from ray.data.block import BlockMetadata
from ray.data.datasource import Datasource, ReadTask
from signal_dataset.storage import ObjectStore

from sds_loader.annotations import Annotations
from sds_loader.augment.chain import Chain, chain_setting
from sds_loader.augment.transforms import Transform
from sds_loader.checksums import VerifyChecksums, verify_checksums_setting
from sds_loader.ray import blocks, order, stretches
from sds_loader.ray.reused_blocks import process_pool
from sds_loader.ray.worker_readers import ReaderOptions, reader_for
from sds_loader.reader import BatchReader
from sds_loader.storage.stores import portable
from sds_loader.windows import Window

#: What a block holds at most when Ray's context sets no target size (Ray's own default).
_DEFAULT_BLOCK_BYTES = 128 << 20

#: What a read task reads at least by default (`default_num_blocks`): Ray spends
#: 10-20 ms on each task on a busy 2-core machine, what decoding 16-32 MiB of
#: zstd takes, so Ray's own default of at least 200 tasks would cost a small
#: dataset more than its reads. (Asked for fewer tasks than it wants, Ray
#: splits their blocks to make up the count, so the count is chosen here.)
MIN_TASK_BYTES = 64 << 20


def passes_are_counted() -> bool:
    """Whether this Ray counts a dataset's passes (2.54 on), so each pass reads the next epoch."""
    return hasattr(DataContext.get_current(), "_execution_idx")


class SDSDatasource(Datasource):
    """SDS records as Ray Data blocks; `sds_loader.ray.read_sds` makes one and reads it."""

    def __init__(
        self,
        uri: str,
        *,
        fields: Sequence[str] | None = None,
        targets: Sequence[str] = (),
        window: Window | None = None,
        annotations: Sequence[Annotations] = (),
        extras: Sequence[str] = (),
        labels: Mapping[str, Sequence[str]] | None = None,
        object_store: ObjectStore | None = None,
        shuffle: bool = False,
        seed: int = 0,
        epoch: int | None = None,
        threads: int = 1,
        verify_checksums: VerifyChecksums = True,
        requests_in_flight: int | None = None,
        augment: Chain | Sequence[Transform] | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, not {seed!r}")
        if epoch is not None and (isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0):
            raise ValueError(f"epoch must be a non-negative integer or None, not {epoch!r}")
        specs = (annotations,) if isinstance(annotations, Annotations) else tuple(annotations)
        wanted = (extras,) if isinstance(extras, str) else tuple(extras)
        # Every row can be traced back to its record.
        wanted = wanted if "ordinal" in wanted else (*wanted, "ordinal")
        chain = chain_setting(augment)
        if chain is not None and chain.seed is None:
            chain = dataclasses.replace(chain, seed=seed)
        reader = BatchReader(
            uri,
            augment=chain,
            fields=fields,
            targets=targets,
            window=window,
            annotations=specs,
            extras=wanted,
            labels=labels,
            object_store=object_store,
            verify_checksums=verify_checksums,
            threads=threads,
            requests_in_flight=requests_in_flight,
        )
        try:
            self._count = len(reader)
            if self._count == 0:
                raise ValueError(f"dataset {reader.uri} holds no records; there is nothing for Ray to read")
            first = np.zeros(1, dtype=np.int64)
            starts = reader.window_starts(first, seed=seed, epoch=0) if window is not None else None
            probe = reader.read(first, starts=starts)
            schema = reader.schema
            self._layout = blocks.layout(window, schema, specs)
            table = blocks.to_table(probe, self._layout)
            self._schema: pa.Schema = table.schema
            self._row_bytes = max(1, int(table.nbytes))
            self._complex = tuple(spec.name for spec in schema.fields if np.dtype(spec.dtype).kind == "c")
            addressing = reader.shard_table()
            if addressing is not None:
                self._run_starts = np.asarray(addressing.starts[:-1], dtype=np.int64)
                self._run_files = np.asarray(addressing.files[:-1], dtype=np.int64)
                # As the table keeps them: compact where it can, a path made per task.
                self._paths: Sequence[str] | None = addressing.paths
            else:  # read by signal_dataset alone: one stretch of unknown files
                self._run_starts = np.zeros(1, dtype=np.int64)
                self._run_files = np.zeros(1, dtype=np.int64)
                self._paths = None
            self._options = ReaderOptions(
                uri=reader.uri,
                fields=tuple(spec.name for spec in schema.fields),
                targets=tuple(targets) if not isinstance(targets, str) else (targets,),
                window=window,
                annotations=specs,
                extras=wanted,
                labels=dict(reader.labels) or None,
                object_store=portable(object_store if object_store is not None else reader.object_store),
                verify_checksums=verify_checksums_setting(verify_checksums),
                threads=threads,
                requests_in_flight=requests_in_flight,
                token=uuid.uuid4().hex,
                augment=chain,
            )
        finally:
            reader.close()
        self._shuffle = bool(shuffle)
        self._seed = seed
        self._epoch = epoch

    @property
    def complex_fields(self) -> tuple[str, ...]:
        """Fields stored as complex numbers, whose columns are float views (see `to_complex`)."""
        return self._complex

    @property
    def block_schema(self) -> pa.Schema:
        """The Arrow schema of every block (`schema` is Ray's own name, a method in some versions)."""
        return self._schema

    def default_num_blocks(self, cpus: int) -> int:
        """Read tasks when none are asked for: one per `MIN_TASK_BYTES`, and at least one per CPU."""
        wanted = -(-self.estimate_inmemory_data_size() // MIN_TASK_BYTES)
        return max(1, min(self._count, max(wanted, cpus)))

    def block_bytes(self, tasks: int, context: DataContext) -> int:
        """The most one block holds, where the dataset is read in `tasks` tasks under `context`."""
        task_bytes = -(-self.estimate_inmemory_data_size() // max(1, tasks))
        return min(task_bytes, max(1, _target_bytes(context) // self._row_bytes) * self._row_bytes)

    def get_name(self) -> str:
        return "SDS"

    def estimate_inmemory_data_size(self) -> int:
        return self._count * self._row_bytes

    def get_read_tasks(
        self,
        parallelism: int,
        per_task_row_limit: int | None = None,
        data_context: DataContext | None = None,
        **_later: Any,
    ) -> list[ReadTask]:
        """One task per stretch of shards, about `parallelism` of them, in this pass's order."""
        context = data_context if data_context is not None else DataContext.get_current()
        # Without an epoch of its own, each pass over the dataset is the next
        # epoch: Ray counts a dataset's executions in its context.
        epoch = self._epoch if self._epoch is not None else int(getattr(context, "_execution_idx", 0))
        rows_per_block = max(1, _target_bytes(context) // self._row_bytes)
        ranges = stretches.plan(self._run_starts, self._count, parallelism)
        if self._shuffle:
            ranges = [ranges[k] for k in order.task_order(len(ranges), seed=self._seed, epoch=epoch).tolist()]
        tasks = []
        for first, stop in ranges:
            files = (
                stretches.files_of(first, stop, self._run_starts, self._run_files, self._paths)
                if self._paths is not None
                else None
            )
            read = StretchRead(
                self._options,
                self._layout,
                first,
                stop,
                rows_per_block,
                self._seed if self._shuffle else None,
                self._seed,
                epoch,
            )
            metadata = _block_metadata(stop - first, (stop - first) * self._row_bytes, files)
            tasks.append(_read_task(read, metadata, self._schema, per_task_row_limit))
        return tasks


@dataclasses.dataclass(frozen=True)
class StretchRead:
    """A read task's function: ordinals ``[first, stop)`` read in its worker, a block at a time.

    Options and numbers only, so it pickles as the task crosses to its worker.
    """

    options: ReaderOptions
    shape: blocks.Layout
    first: int
    stop: int
    rows_per_block: int
    #: Seeds the rows' order within the stretch; None reads them in ordinal order.
    order_seed: int | None
    window_seed: int
    epoch: int
    #: What Ray's task statistics call it (some versions ask every read function).
    __name__ = "read_sds"

    def __call__(self) -> Iterator[pa.Table]:
        reader = reader_for(self.options)
        ordinals = order.rows_of(self.first, self.stop, seed=self.order_seed, epoch=self.epoch)
        for begin in range(0, ordinals.size, self.rows_per_block):
            part = ordinals[begin : begin + self.rows_per_block]
            starts = (
                reader.window_starts(part, seed=self.window_seed, epoch=self.epoch)
                if self.options.window is not None
                else None
            )
            # Each block into memory the last one left, once Ray has copied that into its store.
            arrays = reader.read(part, starts=starts, allocator=process_pool(), epoch=self.epoch)
            yield blocks.to_table(arrays, self.shape)


def _target_bytes(context: DataContext) -> int:
    return int(getattr(context, "target_max_block_size", None) or _DEFAULT_BLOCK_BYTES)


def _block_metadata(rows: int, size: int, files: tuple[str, ...] | None) -> BlockMetadata:
    # Older Ray keeps a block's schema in its metadata; newer Ray, in the read task.
    names = {field.name for field in dataclasses.fields(BlockMetadata)}
    extra: dict[str, Any] = {"schema": None} if "schema" in names else {}
    return BlockMetadata(
        num_rows=rows,
        size_bytes=int(size),
        input_files=files,
        exec_stats=None,
        **extra,
    )


@functools.cache
def _read_task_parameters() -> frozenset[str]:
    return frozenset(inspect.signature(ReadTask.__init__).parameters)


def _read_task(
    read: StretchRead,
    metadata: BlockMetadata,
    schema: pa.Schema,
    row_limit: int | None,
) -> ReadTask:
    accepted = _read_task_parameters()
    extra: dict[str, Any] = {}
    if "schema" in accepted:
        extra["schema"] = schema
    if "per_task_row_limit" in accepted and row_limit is not None:
        extra["per_task_row_limit"] = row_limit
    return ReadTask(read, metadata, **extra)
