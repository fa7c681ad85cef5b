"""The ways of reading a batch that the benchmark compares, one Runner each.

From the slowest a user is likely to write to the fastest this package offers:
signal_dataset's PyTorch guide adapter (one record per `__getitem__`, through a
DataLoader), signal_dataset's batched `__getitems__` with tensor conversion and
default collate (the baseline every "x" in the table is relative to),
array_record's own batched read of the raw bytes (what a user who brings their
own loader starts from, before any decoding), BatchReader, and the DataLoader
adapter built on it. Every runner produces what a training step consumes (a
batch of the inputs field and its target), except array_record's, which stops
at bytes and says so.

Each runner keeps its last batch alive (`held`) until the next one is made,
as a training loop does while it steps on it: a reader that reuses freed
buffers must not look faster here than it will be in training.
"""

from __future__ import annotations

import functools
import gc
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import signal_dataset as sds

from sds_loader.cli.bench.plan import Plan
from sds_loader.cli.bench.timing import Runner, Skip

#: The options signal_dataset's own reader passes (StorageOptions.reader_options).
ARRAY_RECORD_OPTIONS = "readahead_buffer_size:0,max_parallelism:0"


@functools.cache
def _torch() -> tuple[Any, Any, Any]:
    try:
        import torch
        from torch.utils.data import DataLoader, default_collate
    except ImportError as exc:
        raise Skip(f"skipped: torch is not installed ({exc})") from None
    return torch, DataLoader, default_collate


class _Batches:
    """A batch_sampler whose batches can be swapped between passes.

    Lets one DataLoader, with its workers kept alive, serve the warm-up pass
    and then the timed pass, so worker start-up is not timed.
    """

    def __init__(self) -> None:
        self.current: list[list[int]] = []

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.current)

    def __len__(self) -> int:
        return len(self.current)


class _LoaderRunner(Runner):
    def __init__(self, loader: Any, sampler: _Batches, workers: int, dataset: Any = None) -> None:
        self.loader = loader
        self.dataset = dataset
        self.sampler = sampler
        self.held: object = None
        # Batches go to workers in turn: one each opens every worker's reader.
        self.warm_up_batches = max(1, workers)

    def run(self, batches: Sequence[np.ndarray]) -> Iterator[int]:
        self.sampler.current = [batch.tolist() for batch in batches]
        for self.held, indices in zip(self.loader, self.sampler.current, strict=True):
            yield len(indices)

    def read_stats(self) -> Any:
        # SDSTorchDataset's stats sum the main process and its workers.
        stats = getattr(self.dataset, "stats", None)
        return stats().total if stats is not None else None

    def close(self) -> None:
        # Drops the persistent workers' iterator, which shuts the workers down.
        self.loader = self.held = None
        gc.collect()


def _loader(
    dataset: object, *, workers: int = 0, collate_fn: Callable[..., Any] | None = None
) -> _LoaderRunner:
    _, DataLoader, _ = _torch()
    sampler = _Batches()
    loader = DataLoader(
        dataset,
        batch_sampler=sampler,
        num_workers=workers,
        collate_fn=collate_fn,
        persistent_workers=workers > 0,
    )
    return _LoaderRunner(loader, sampler, workers, dataset)


# -- signal_dataset's guide adapter ------------------------------------------


class GuideAdapter:
    """The map-style adapter from signal_dataset's "Training with PyTorch" guide.

    As the guide writes it (field and metadata key made parameters): one record
    per `__getitem__`, copied into a tensor, batched by default_collate.
    """

    def __init__(self, uri: str, inputs: str, target: str | None) -> None:
        self._uri = uri
        self._inputs = inputs
        self._target = target
        self._dataset: sds.Dataset | None = None
        self._pid: int | None = None

    def _open(self) -> sds.Dataset:
        pid = os.getpid()
        dataset = self._dataset
        if dataset is None or self._pid != pid:
            dataset = self._dataset = sds.open(self._uri)
            self._pid = pid
        return dataset

    def __len__(self) -> int:
        return len(self._open())

    def __getitem__(self, index: int) -> dict[str, Any]:
        torch, _, _ = _torch()
        record = self._open()[index]
        item = {"inputs": torch.from_numpy(record[self._inputs].data.copy())}
        if self._target is not None:
            item["target"] = torch.tensor(record.metadata[self._target])
        return item

    def __getstate__(self) -> dict[str, object]:
        return {"_uri": self._uri, "_inputs": self._inputs, "_target": self._target}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._dataset = None
        self._pid = None


def guide_adapter(plan: Plan) -> Runner:
    return _loader(GuideAdapter(plan.uri, plan.inputs, plan.target))


# -- signal_dataset's batched read -------------------------------------------


class _GetItems(Runner):
    def __init__(self, plan: Plan) -> None:
        self.torch, _, self.collate = _torch()
        self.dataset = sds.open(plan.uri)
        self.inputs = plan.inputs
        self.target = plan.target

    def _item(self, record: sds.Record) -> dict[str, Any]:
        item = {"inputs": self.torch.from_numpy(record[self.inputs].data.copy())}
        if self.target is not None:
            item["target"] = self.torch.tensor(record.metadata[self.target])
        return item

    def run(self, batches: Sequence[np.ndarray]) -> Iterator[int]:
        for batch in batches:
            records = self.dataset.__getitems__(batch.tolist())
            self.held = self.collate([self._item(record) for record in records])
            yield batch.size


def sds_getitems(plan: Plan) -> Runner:
    return _GetItems(plan)


# -- array_record's batched read of raw bytes --------------------------------


class _ArrayRecord(Runner):
    def __init__(self, plan: Plan) -> None:
        from array_record.python.array_record_module import ArrayRecordReader

        from sds_loader.dataset import shard_table

        if plan.shards_unavailable:
            raise Skip(f"skipped: {plan.shards_unavailable}")
        self.table = shard_table(sds.open(plan.uri))
        self.readers = [ArrayRecordReader(path, ARRAY_RECORD_OPTIONS) for path in self.table.paths]

    def run(self, batches: Sequence[np.ndarray]) -> Iterator[int]:
        for batch in batches:
            files, locals_ = self.table.locate(batch)
            self.held = [
                self.readers[file].read(locals_[files == file].tolist()) for file in np.unique(files).tolist()
            ]
            yield batch.size

    def note(self) -> str:
        return "bytes only, not decoded"

    def close(self) -> None:
        for reader in self.readers:
            reader.close()


def array_record_read(plan: Plan) -> Runner:
    return _ArrayRecord(plan)


# -- BatchReader ---------------------------------------------------------------


class _BatchReader(Runner):
    def __init__(
        self, plan: Plan, threads: int | None, verify_checksums: bool, stage_sampling: int | None = None
    ) -> None:
        from sds_loader import BatchReader, stage_times

        targets = (plan.target,) if plan.target is not None else ()
        with stage_times.sampled_every(
            stage_sampling if stage_sampling is not None else stage_times.sampling()
        ):
            self.reader = BatchReader(
                plan.uri,
                fields=[plan.inputs],
                targets=targets,
                threads=threads,
                verify_checksums=verify_checksums,
            )

    def read_stats(self) -> Any:
        return self.reader.stats.snapshot()

    def run(self, batches: Sequence[np.ndarray]) -> Iterator[int]:
        for batch in batches:
            self.held = self.reader.read(batch)
            yield batch.size

    def release_files(self) -> None:
        """Close the shards (and their mappings); the next read opens them again."""
        self.reader.close()

    def note(self) -> str:
        stats = self.reader.stats
        if stats.fallback_records and not stats.native_records:
            reason = self.reader.native_unavailable_reason or "records the native core declined"
            return f"signal_dataset fallback: {reason}"
        if stats.fallback_records:
            total = stats.fallback_records + stats.native_records
            return f"{stats.fallback_records} of {total} records via fallback"
        return ""


def batch_reader(
    threads: int | None, *, verify_checksums: bool = True, stage_sampling: int | None = None
) -> Callable[[Plan], _BatchReader]:
    """BatchReader at `threads`; `stage_sampling` 0 times no stage (the cost of timing them)."""

    def open_runner(plan: Plan) -> _BatchReader:
        return _BatchReader(plan, threads, verify_checksums, stage_sampling)

    return open_runner


# -- sds_loader.torch ----------------------------------------------------------


def torch_loader(workers: int) -> Callable[[Plan], Runner]:
    def open_runner(plan: Plan) -> Runner:
        _torch()
        try:
            from sds_loader.torch import SDSTorchDataset, collate
        except ImportError as exc:
            raise Skip(f"skipped: not available (sds_loader.torch: {exc})") from None
        dataset = SDSTorchDataset(plan.uri, inputs=plan.inputs, target=plan.target)
        return _loader(dataset, workers=workers, collate_fn=collate)

    return open_runner
