"""What one benchmark variant reads: a dataset, its fields, and fixed shuffled batches.

Every method of a variant reads the very same batches of ordinals, drawn from a
seeded shuffle, so that the rows of the table differ only in how they read.
Shuffled rather than sequential because that is what training does, and it is
the access pattern that makes per-record overheads (and chunk grouping) show.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import signal_dataset as sds

from sds_loader.cli import native_tools
from sds_loader.cli.dataset_shards import Run, ShardFile, ShardsUnavailable, shard_files
from sds_loader.dataset import open_dataset

#: Batches measured when --batches is not given: one epoch of the built-in
#: dataset at the default batch size, and a bounded run on a large dataset...
DEFAULT_MAX_BATCHES = 16
#: ...unless those hold fewer records than this and fewer bytes than that;
#: then as many batches as reach either (at most an epoch). A pass opens its
#: reader afresh, and 16 batches of 1 KiB records are some 25 ms of reading,
#: in which opening the shards they touch weighs far more than in an epoch.
DEFAULT_MIN_RECORDS = 16384
DEFAULT_MIN_BYTES = 256 << 20
SEED = 0
COMPRESSED = ("zstd", "snappy", "brotli", "mixed")


@dataclass
class Plan:
    variant: str
    uri: str
    inputs: str
    target: str | None
    batches: list[np.ndarray]
    #: Bytes of the inputs field per record: the unit of every MB/s in the report.
    record_bytes: int
    #: "none", "zstd", ..., or None when the native extension could not tell.
    compression: str | None
    shards: list[ShardFile] = field(default_factory=list)
    #: Why shard files could not be listed (a reference dataset), else None.
    shards_unavailable: str | None = None
    #: How the report names the dataset; its URI unless the caller says better.
    source: str = ""

    @property
    def records(self) -> int:
        return int(sum(batch.size for batch in self.batches))

    @property
    def bound_key(self) -> str:
        """The row whose rate this variant's other rows are a percentage of."""
        return "bound_decompress" if self.compression in COMPRESSED else "bound_memcpy"

    def touched(self) -> list[ShardFile]:
        """The shard files the batches read from."""
        wanted = np.unique(np.concatenate(self.batches)) if self.batches else np.empty(0, np.int64)

        def reads(run: Run) -> bool:
            at = int(np.searchsorted(wanted, run.first_ordinal))
            return at < wanted.size and wanted[at] < run.first_ordinal + run.take

        return [shard for shard in self.shards if any(reads(run) for run in shard.runs)]


def shuffled_batches(length: int, batch_size: int, count: int, *, seed: int = SEED) -> list[np.ndarray]:
    """`count` batches of one seeded shuffle: no record is read twice in a pass.

    A pass that read some records twice would find them in the CPU cache the
    second time and report a rate no epoch of training sees, so a batch size or
    count that needs more records than the dataset holds is refused, with the
    largest that fits.
    """
    if length < 1:
        raise ValueError("the dataset holds no records to read")
    if batch_size > length:
        raise ValueError(
            f"--batch-size {batch_size} is more than the {length} records of the dataset, so a batch "
            f"would read records twice; the largest is --batch-size {length}"
        )
    if batch_size * count > length:
        raise ValueError(
            f"--batches {count} of --batch-size {batch_size} need {batch_size * count} records and the "
            f"dataset holds {length}, so a pass would read records twice; the largest is "
            f"--batches {length // batch_size} at this batch size"
        )
    order = np.random.default_rng(seed).permutation(length)
    return [order[k * batch_size : (k + 1) * batch_size].astype(np.int64) for k in range(count)]


def default_batch_count(length: int, batch_size: int, record_bytes: int) -> int:
    records = min(DEFAULT_MIN_RECORDS, -(-DEFAULT_MIN_BYTES // max(record_bytes, 1)))
    wanted = max(DEFAULT_MAX_BATCHES, -(-records // batch_size))
    return max(1, min(wanted, length // batch_size))


def choose_fields(dataset: sds.Dataset, inputs: str | None, target: str | None) -> tuple[str, str | None]:
    """The field to batch and the metadata key to use as target.

    Defaults follow signal_dataset's PyTorch guide ("samples" and "label") and
    otherwise take the largest field (the signal, usually) and no target, so
    any dataset can be timed.
    """
    first = dataset.record_metadata[0]
    names = sorted(first.fields)
    if inputs is None:
        inputs = (
            "samples"
            if "samples" in first.fields
            else max(names, key=lambda name: field_bytes(dataset, name))
        )
    elif inputs not in first.fields:
        raise ValueError(
            f"record 0 has no field {inputs!r}; its fields are {names}. Pass --inputs with one of them."
        )
    if target is None:
        value = first.metadata.get("label")
        target = "label" if isinstance(value, int | float) else None
    elif not isinstance(first.metadata.get(target), int | float):
        raise ValueError(
            f"record 0's metadata has no number under {target!r} (its keys are "
            f"{sorted(first.metadata)}). Pass --target with a numeric key."
        )
    return inputs, target


def field_bytes(dataset: sds.Dataset, name: str) -> int:
    spec = dataset.record_metadata[0].fields[name]
    return int(np.dtype(spec.dtype).itemsize * math.prod(spec.shape))


def compression_of(shards: list[ShardFile]) -> str | None:
    """The shards' compression ("none", "zstd", ... or "mixed"), or None without the extension."""
    try:
        summarize = native_tools.function("shard_summary")
    except native_tools.NativeUnavailable:
        return None
    kinds = {summarize(shard.path)["compression"] for shard in shards}
    if not kinds:
        return None
    return kinds.pop() if len(kinds) == 1 else "mixed"


def variant_name(compression: str | None) -> str:
    if compression is None:
        return "dataset"
    return "uncompressed" if compression == "none" else compression


def make(
    uri: str,
    *,
    batch_size: int,
    batches: int | None,
    inputs: str | None = None,
    target: str | None = None,
    variant: str | None = None,
    compression: str | None = None,
    source: str | None = None,
) -> Plan:
    """The plan for one dataset; `compression` is what the caller knows of it
    (the built-in dataset's writer options), used when the extension cannot tell."""
    dataset = open_dataset(uri)
    inputs, target = choose_fields(dataset, inputs, target)
    record_bytes = field_bytes(dataset, inputs)
    count = batches if batches is not None else default_batch_count(len(dataset), batch_size, record_bytes)
    plan = Plan(
        variant="",
        uri=uri,
        inputs=inputs,
        target=target,
        batches=shuffled_batches(len(dataset), batch_size, count),
        record_bytes=record_bytes,
        compression=None,
        source=source or uri,
    )
    try:
        plan.shards = shard_files(dataset)
    except ShardsUnavailable as exc:
        plan.shards_unavailable = exc.short
    plan.compression = (compression_of(plan.touched()) if plan.shards else None) or compression
    plan.variant = variant or variant_name(plan.compression)
    return plan
