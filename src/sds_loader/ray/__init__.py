"""Ray Data reads SDS natively: ``read_sds(uri)`` is a `ray.data.Dataset` of its records.

Usage::

    import ray
    from sds_loader.ray import read_sds

    dataset = read_sds("s3://bucket/captures", fields=["samples"], targets=["label"])
    for batch in dataset.iter_torch_batches(batch_size=256): ...

Each read task is a stretch of shards read by a `BatchReader` of its own, in
its worker (`sds_loader.ray.datasource`); blocks are Arrow tables with one
column per field, target and extra, and always an ``ordinal`` column, so
every row can be traced to its record. Complex fields arrive as float views
with a trailing axis of 2 (`to_complex` turns a batch back). Needs Ray Data:
``pip install 'sds-loader[ray]'``.
"""

from __future__ import annotations

try:
    import ray
    import ray.data as _ray_data
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        "sds_loader.ray needs Ray Data, which is not installed: pip install 'sds-loader[ray]'"
    ) from error

from collections.abc import Mapping, Sequence
from typing import Any

from signal_dataset.storage import ObjectStore

from sds_loader.annotations import Annotations
from sds_loader.augment.chain import Chain
from sds_loader.augment.transforms import Transform
from sds_loader.checksums import VerifyChecksums
from sds_loader.ray import startup_budget
from sds_loader.ray.complex_view import to_complex
from sds_loader.ray.datasource import SDSDatasource
from sds_loader.windows import Window

__all__ = ["SDSDatasource", "read_sds", "to_complex"]


def read_sds(
    uri: str,
    *,
    fields: Sequence[str] | None = None,
    targets: Sequence[str] = (),
    window: Window | None = None,
    annotations: Sequence[Annotations] = (),
    extras: Sequence[str] = (),
    labels: Mapping[str, Sequence[str]] | None = None,
    object_store: ObjectStore | None = None,
    override_num_blocks: int | None = None,
    shuffle: bool = False,
    seed: int = 0,
    epoch: int | None = None,
    threads: int = 1,
    verify_checksums: VerifyChecksums = True,
    requests_in_flight: int | None = None,
    ray_remote_args: dict[str, Any] | None = None,
    concurrency: int | None = None,
    augment: Chain | Sequence[Transform] | None = None,
) -> _ray_data.Dataset:
    """The records of the SDS dataset at `uri` (a path, ``s3://`` or ``gs://``) as a Ray Dataset.

    `fields`, `targets`, `window`, `annotations`, `extras`, `labels`,
    `object_store`, `verify_checksums` and `requests_in_flight` mean what they
    mean to `BatchReader`; ``ordinal`` is always among the columns. Each read
    task reads with `threads` threads (default 1: Ray's tasks are the
    parallelism, one a CPU). `override_num_blocks` sets how many read tasks
    there are; by default one per 64 MiB of records (at least one per CPU
    of the cluster, when Ray is started), since each task costs Ray a fixed
    10-20 ms (`SDSDatasource.default_num_blocks`). A task is a stretch of
    whole shards, or part of one when more tasks are asked for than there are
    shards, and yields blocks of about Ray's target block size.

    ``shuffle=True`` reads in a seeded local order: the read tasks in a
    permuted order and each task's rows in a permuted order of their own,
    drawn from (`seed`, epoch), so shard locality is kept (see
    `sds_loader.ray.order` for what that does and does not randomise, against
    ``Dataset.random_shuffle``). Without `epoch`, each pass over the dataset is
    the next epoch (Ray's count of the dataset's executions, from Ray 2.54 on;
    older Ray repeats epoch 0's order, so pass `epoch`); with it, every pass reads that epoch's
    order. A window's random crops follow the same `seed` and epoch, and so
    does `augment` (a `sds_loader.augment.Chain`, drawn under `seed` unless
    it has a seed of its own): its parameter keys are columns.
    `ray_remote_args` and `concurrency` go to `ray.data.read_datasource`.

    Ray Data (2.60, with its autoscaling coordinator) does not know an
    execution's resources for about its first second, and runs one task at
    a time meanwhile (half of a pass over a gigabyte on two CPUs). The
    dataset's own `DataContext` (not the process's) therefore budgets its
    reads by a policy of this package's until Ray knows its limits: it
    submits two tasks a CPU free as the pass begins, so that one runs on
    each, while its blocks in the object store stay under four a CPU
    (`sds_loader.ray.startup_budget`); after
    that, and for every other operator, Ray's own. The trade-off: for that
    second, the reads may take CPUs and object-store room (those few blocks)
    that Ray's reservations would have kept for the dataset's other
    operators, such as a ``map_batches`` after them. Datasets derived from
    this one keep its context, so the same holds for their SDS reads.
    """
    if override_num_blocks is not None and (
        isinstance(override_num_blocks, bool)
        or not isinstance(override_num_blocks, int)
        or override_num_blocks < 1
    ):
        raise ValueError(
            f"override_num_blocks must be a positive integer (read tasks) or None, "
            f"not {override_num_blocks!r}"
        )
    source = SDSDatasource(
        uri,
        fields=fields,
        targets=targets,
        window=window,
        annotations=annotations,
        extras=extras,
        labels=labels,
        object_store=object_store,
        shuffle=shuffle,
        seed=seed,
        epoch=epoch,
        threads=threads,
        verify_checksums=verify_checksums,
        requests_in_flight=requests_in_flight,
        augment=augment,
    )
    if override_num_blocks is None:
        cpus = 1
        if ray.is_initialized():
            cpus = int(ray.cluster_resources().get("CPU", 1))  # type: ignore[no-untyped-call]
        override_num_blocks = source.default_num_blocks(cpus)
    options: dict[str, Any] = {"override_num_blocks": override_num_blocks}
    if ray_remote_args is not None:
        options["ray_remote_args"] = ray_remote_args
    if concurrency is not None:
        options["concurrency"] = concurrency
    dataset: _ray_data.Dataset = _ray_data.read_datasource(source, **options)
    startup_budget.install(dataset.context, source.block_bytes(override_num_blocks, dataset.context))
    return dataset
