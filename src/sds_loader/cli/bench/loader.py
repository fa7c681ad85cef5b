"""DataLoader rows: workers against the main process, delivery cost, and sampler order on a cold disk.

`sds-loader bench --loader` times whole epochs through a real DataLoader over
`SDSTorchDataset` with `collate`, batch after batch held like a training step
holds it, on each variant of the dataset:

- **workers**: records/s with 2 persistent workers as a share of the same
  loop with 0 workers (the main process reading with its own threads). Both
  loops run in one process, one after the other, `repeats` times; each row is
  the median of the per-repeat ratios, so a machine busy with other work
  shifts both sides of a ratio alike.
- **delivery**: CPU time per batch spent outside reading and decoding: the
  CPU seconds of the main process and its workers over the epochs, divided
  by the batches, less what `BatchReader.read` with one thread takes per
  batch (the median of one measurement per repeat). CPU time rather than
  wall time, so waiting for a core does not count; contention still slows
  each CPU second somewhat, so read the row to a millisecond or two.
- **cold**: one epoch with every shard's pages dropped from the page cache
  first (``posix_fadvise(DONTNEED)``), in `ShardAwareSampler` order
  without and with readahead (two batches ahead) against ``shuffle=True``,
  and the ratios of records/s (readahead of two batches is the default). A
  warm epoch of the sampler's DataLoader is decoding's pace: once the disk
  keeps up, no cold order runs faster. On a disk that holds the dataset in
  its own cache (a VM's virtual disk, say), "cold" is warmer than a real
  cold read, and the ratio smaller.
"""

from __future__ import annotations

import functools
import gc
import multiprocessing
import os
import statistics
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from sds_loader.cli.bench.plan import Plan

if TYPE_CHECKING:
    from torch.utils.data import DataLoader

    from sds_loader.cli.bench.run import BenchConfig
    from sds_loader.torch import SDSTorchDataset

#: Epochs timed per repeat of a worker row (after one untimed epoch that
#: starts the workers and warms the page cache).
EPOCHS = 3
REPEATS = 3
WORKERS = 2


@dataclass
class LoaderRow:
    variant: str
    key: str
    label: str
    #: One value per repeat; the row shows their median.
    values: list[float] = field(default_factory=list)
    unit: str = ""
    note: str = ""

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None


def _cpu_seconds(pids: Iterable[int]) -> float:
    """User + system CPU seconds of other processes so far, from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def _children() -> list[int]:
    return [child.pid for child in multiprocessing.active_children() if child.pid is not None]


def _dataset(plan: Plan, worker_blocks: int | None = None) -> SDSTorchDataset:
    from sds_loader.torch import SDSTorchDataset

    extra: dict[str, Any] = {} if worker_blocks is None else {"worker_blocks": worker_blocks}
    return SDSTorchDataset(plan.uri, inputs=plan.inputs, target=plan.target, **extra)


def _epochs(loader: Iterable[Any], epochs: int) -> tuple[int, int, float, float]:
    """(records, batches, wall seconds, CPU seconds of this process and its children)."""
    held = None
    records = batches = 0
    # Persistent workers are alive before and after; their CPU time is what they spent in between.
    pids = _children()
    cpu = time.process_time() + _cpu_seconds(pids)
    started = time.perf_counter()
    for _ in range(epochs):
        for held in loader:
            records += len(next(iter(held.values())))
            batches += 1
    wall = time.perf_counter() - started
    cpu = time.process_time() + _cpu_seconds(pids) - cpu
    del held
    return records, batches, wall, cpu


def _loader(
    plan: Plan,
    batch_size: int,
    *,
    workers: int,
    sampler: Any = None,
    seed: int = 0,
    worker_blocks: int | None = None,
) -> DataLoader[Any]:
    import torch
    from torch.utils.data import DataLoader

    from sds_loader.torch import collate

    dataset = _dataset(plan, worker_blocks)
    shuffle = sampler is None
    if sampler is not None:
        sampler = sampler(dataset)
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=shuffle,
        sampler=sampler,
        generator=torch.Generator().manual_seed(seed) if shuffle else None,
        num_workers=workers,
        persistent_workers=workers > 0,
        collate_fn=collate,
    )


def _decode_cpu_per_batch(plan: Plan, batch_size: int) -> float:
    """CPU seconds per batch that BatchReader.read with one thread takes, over one shuffled epoch."""
    from sds_loader import BatchReader

    targets = (plan.target,) if plan.target is not None else ()
    reader = BatchReader(plan.uri, fields=[plan.inputs], targets=targets, threads=1)
    order = np.random.default_rng(0).permutation(len(reader))
    batches = [order[k : k + batch_size] for k in range(0, len(order), batch_size)]
    held = reader.read(batches[0])
    started = time.process_time()
    for batch in batches:
        held = reader.read(batch)
    del held
    return (time.process_time() - started) / len(batches)


def workers_rows(
    plan: Plan, batch_size: int, *, epochs: int = EPOCHS, repeats: int = REPEATS
) -> list[LoaderRow]:
    """0 workers, 2 workers with the block ring, and 2 workers with a fresh block per batch."""
    setups = {
        "w0": (0, None, "DataLoader, 0 workers"),
        "ring": (WORKERS, None, f"DataLoader, {WORKERS} workers"),
        "fresh": (WORKERS, 0, f"DataLoader, {WORKERS} workers, a fresh block per batch"),
    }
    rates = {
        key: LoaderRow(plan.variant, f"loader_{key}", label, unit="rec/s")
        for key, (_, _, label) in setups.items()
    }
    delivery = {
        key: LoaderRow(
            plan.variant,
            f"delivery_{key}",
            f"delivery per batch: {label.removeprefix('DataLoader, ')}",
            unit="ms CPU",
        )
        for key, (_, _, label) in setups.items()
    }
    share = {
        key: LoaderRow(
            plan.variant, f"share_{key}", f"{label.removeprefix('DataLoader, ')}, as % of 0 workers", unit="%"
        )
        for key, (_, _, label) in setups.items()
        if key != "w0"
    }
    decodes = []
    spent: dict[str, list[float]] = {key: [] for key in setups}
    for _ in range(repeats):
        decodes.append(_decode_cpu_per_batch(plan, batch_size))
        rate = {}
        for key, (workers, blocks, _) in setups.items():
            loader = _loader(plan, batch_size, workers=workers, worker_blocks=blocks)
            _epochs(loader, 1)  # start workers, warm the page cache and the pools
            records, batches, wall, cpu = _epochs(loader, epochs)
            rate[key] = records / wall
            rates[key].values.append(rate[key])
            spent[key].append(cpu / batches)
            del loader
            gc.collect()
        for key, row in share.items():
            row.values.append(100 * rate[key] / rate["w0"])
    # One decoding figure for every repeat: its own noise would otherwise enter each difference.
    decode = statistics.median(decodes)
    for key, row in delivery.items():
        row.values = [1000 * (cpu - decode) for cpu in spent[key]]
        row.note = f"less decoding alone, {1000 * decode:.1f} ms CPU per batch (median of {len(decodes)})"
    return [*rates.values(), *share.values(), *delivery.values()]


def drop_pages(paths: Iterable[str]) -> None:
    """Ask the kernel to forget the cached pages of each file (clean pages only: fsync first)."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def cold_rows(plan: Plan, batch_size: int, *, repeats: int = REPEATS, workers: int = 0) -> list[LoaderRow]:
    """Cold epochs (shuffle=True, ShardAwareSampler without, with readahead), a warm one, ratios per repeat.

    The warm epoch (the sampler's DataLoader again, its pages now cached)
    is decoding's pace: once the disk keeps up, no cold order runs faster.
    """
    from sds_loader.samplers import ShardAwareSampler

    if not hasattr(os, "posix_fadvise"):
        return [LoaderRow(plan.variant, "cold", "cold epoch", note="skipped: no posix_fadvise here")]
    paths = [shard.path for shard in plan.shards]
    ahead = 2 * batch_size
    labels = {
        "no_readahead": "ShardAwareSampler(readahead=0)",
        "readahead": f"ShardAwareSampler(readahead={ahead})",
    }
    rows = {
        "shuffle": LoaderRow(plan.variant, "cold_shuffle", "cold epoch, shuffle=True", unit="rec/s"),
        **{
            key: LoaderRow(plan.variant, f"cold_{key}", f"cold epoch, {label}", unit="rec/s")
            for key, label in labels.items()
        },
        "warm": LoaderRow(plan.variant, "warm_shard_aware", "warm epoch, ShardAwareSampler", unit="rec/s"),
    }
    ratios = {
        **{
            key: LoaderRow(plan.variant, f"cold_ratio_{key}", f"{label} / shuffle=True, cold", unit="x")
            for key, label in labels.items()
        },
        "warm": LoaderRow(
            plan.variant,
            "cold_bound",
            "bound: warm ShardAwareSampler / cold shuffle=True",
            unit="x",
            note="decoding's pace, measured in the same repeat",
        ),
    }
    orders = {
        "shuffle": None,
        "no_readahead": lambda ds, seed: ShardAwareSampler(ds, seed=seed, readahead=0),
        "readahead": lambda ds, seed: ShardAwareSampler(ds, seed=seed, readahead=ahead),
    }
    for repeat in range(repeats):
        rate = {}
        for name, order in orders.items():
            sampler = None if order is None else functools.partial(order, seed=repeat)
            loader = _loader(plan, batch_size, workers=workers, sampler=sampler, seed=repeat)
            # The kernel keeps pages a process has mapped, and a reader maps
            # the shards it reads warm: it lets go of its files first.
            cast("SDSTorchDataset", loader.dataset).reader.close()
            drop_pages(paths)
            records, _, wall, _ = _epochs(loader, 1)
            rate[name] = records / wall
            if name == "readahead":
                records, _, wall, _ = _epochs(loader, 1)
                rate["warm"] = records / wall
            del loader
            gc.collect()
        for name, row in rows.items():
            row.values.append(rate[name])
        for name, row in ratios.items():
            row.values.append(rate[name] / rate["shuffle"])
    for row in (rows["readahead"], ratios["readahead"]):
        row.note = "the sampler's default"
    return [*rows.values(), *ratios.values()]


def main(config: BenchConfig) -> str:
    """Run every loader row for `config` (a BenchConfig); write loader.md to its --out; return the table."""
    from sds_loader.cli.bench.run import plans_for, results_dir

    out = results_dir(config.out)
    written = os.path.join(out, "loader.md")
    if os.path.lexists(written):
        raise FileExistsError(
            f"{written} holds an earlier run's rows; pass a new --out, or remove it to replace it"
        )

    def say(message: str) -> None:
        if config.progress:
            print(message, file=sys.stderr, flush=True)

    plans = plans_for(config)
    rows: list[LoaderRow] = []
    for plan in plans.values():
        say(f"{plan.variant}: DataLoader epochs with and without workers")
        rows += workers_rows(plan, config.batch_size)
        say(f"{plan.variant}: cold epochs in two orders")
        rows += cold_rows(plan, config.batch_size)
    text = (
        f"`{config.command}`: batches of {config.batch_size}, medians of {REPEATS} repeats "
        f"({EPOCHS} epochs each for the worker rows), {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f} at the end.\n\n{table(rows)}\n"
    )
    os.makedirs(out, exist_ok=True)
    with open(written, "w", encoding="utf-8") as handle:
        handle.write(text)
    return f"{text}\nrows: {written}"


def table(rows: list[LoaderRow]) -> str:
    lines = ["| variant | row | median | repeats | note |", "|---|---|---:|---|---|"]
    for row in rows:
        median = row.median
        shown = "-" if median is None else (f"{median:,.0f}" if median >= 100 else f"{median:.2f}")
        each = ", ".join(f"{v:,.0f}" if v >= 100 else f"{v:.2f}" for v in row.values)
        lines.append(f"| {row.variant} | {row.label} | {shown} {row.unit} | {each} | {row.note} |")
    return "\n".join(lines)
