"""The built-in benchmark dataset, written once and cached per user.

`sds-loader bench` with no PATH needs datasets that look like the ones the
loader is for: captures of 2 x 4096 complex64 noise (64 KiB each) with an
integer label, written through signal_dataset's own writer twice, as the
default zstd shards and as an uncompressed copy, because the two bound the
reader differently (decompression against memory bandwidth) and a user with
either kind wants to see their case; and short captures as real radio
corpora hold them, RadioML-style records of 256 x 2 int16 (1 KiB) sixteen
times as many, in 256 zstd shards, where what a reader spends per record and
per shard, not per byte, decides its speed.

Writing 2 x 256 MiB takes a few seconds, so the result is cached, keyed by
every parameter that changes its bytes, in the first of: `--cache-dir`,
$SDS_LOADER_CACHE_DIR, $XDG_CACHE_HOME/sds-loader, ~/.cache/sds-loader. Half
a gigabyte is not written anywhere unannounced: `ensure` says where and how
much, before writing and when reusing. A dataset is built in a temporary sibling
directory and renamed into place only when complete, so an interrupted build
is never mistaken for a cached one.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import signal_dataset as sds

from sds_loader.cli.progress import Progress
from sds_loader.cli.progress import progress as progress_bar
from sds_loader.cli.textfmt import size

RECORDS = 4096
CHANNELS = 2
SAMPLES = 4096
CLASSES = 10
RECORDS_PER_SHARD = 512
#: Bump when the records' content or layout changes, so old caches are not reused.
VERSION = 1
#: Hidden override of RECORDS, so tests exercise this path in seconds.
RECORDS_ENV = "SDS_LOADER_BENCH_RECORDS"

#: Variant name -> signal_dataset writer options (None: signal_dataset's default, zstd).
VARIANTS: dict[str, str | None] = {
    "zstd": None,
    "uncompressed": "group_size:1,uncompressed",
    "short-zstd": None,
}
#: Variant name -> the compression its writer options produce.
COMPRESSION = {"zstd": "zstd", "uncompressed": "none", "short-zstd": "zstd"}
#: The short-record variant: this many records for each capture of the others, in SHORT_SHARDS shards.
SHORT_PER_CAPTURE = 16
SHORT_SHARDS = 256
SHORT_SAMPLES = 256


#: Where the built-in dataset is cached, unless --cache-dir says otherwise.
CACHE_DIR_ENV = "SDS_LOADER_CACHE_DIR"


def cache_dir(override: str | None = None) -> str:
    if override:
        return override
    if os.environ.get(CACHE_DIR_ENV):
        return os.environ[CACHE_DIR_ENV]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "sds-loader")


def record_count(override: int | None = None) -> int:
    """RECORDS, unless the caller or $SDS_LOADER_BENCH_RECORDS asks for another size."""
    if override is None and os.environ.get(RECORDS_ENV):
        try:
            override = int(os.environ[RECORDS_ENV])
        except ValueError:
            raise ValueError(
                f"${RECORDS_ENV} must be a whole number, not {os.environ[RECORDS_ENV]!r}"
            ) from None
    count = RECORDS if override is None else override
    if count < 1:
        raise ValueError(f"the built-in dataset needs at least one record, not {count}")
    return count


def capture(ordinal: int) -> sds.Record:
    """Record `ordinal`: seeded complex Gaussian noise, which compresses as real captures do (barely)."""
    rng = np.random.default_rng(ordinal)
    shape = (CHANNELS, SAMPLES)
    data = rng.standard_normal(shape, dtype=np.float32) + 1j * rng.standard_normal(shape, dtype=np.float32)
    axes = (sds.Axis("channel", CHANNELS), sds.Axis("time", SAMPLES))
    return sds.Record(
        id=f"capture-{ordinal:06d}",
        fields={"samples": sds.Field(data.astype(np.complex64), axes=axes)},
        metadata={"label": ordinal % CLASSES, "snr_db": float(rng.uniform(-5.0, 20.0))},
    )


def short_capture(ordinal: int) -> sds.Record:
    """A short record: 256 x 2 int16 (1 KiB), I and Q of seeded noise, as RadioML stores them."""
    rng = np.random.default_rng(ordinal)
    data = rng.normal(0.0, 2000.0, size=(SHORT_SAMPLES, 2)).astype(np.int16)
    axes = (sds.Axis("time", SHORT_SAMPLES), sds.Axis("iq", 2))
    return sds.Record(
        id=f"short-{ordinal:08d}",
        fields={"samples": sds.Field(data, axes=axes)},
        metadata={"label": ordinal % CLASSES, "snr_db": float(rng.uniform(-5.0, 20.0))},
    )


def _variant_count(variant: str, count: int) -> int:
    return count * SHORT_PER_CAPTURE if variant.startswith("short") else count


def _per_shard(variant: str, count: int) -> int:
    if variant.startswith("short"):
        # SHORT_SHARDS shards at full size; a test's small dataset keeps some records a shard.
        return max(16, count // SHORT_SHARDS)
    return min(RECORDS_PER_SHARD, max(1, count // 4))


def _record_bytes(variant: str) -> int:
    if variant.startswith("short"):
        return SHORT_SAMPLES * 2 * np.dtype(np.int16).itemsize
    return CHANNELS * SAMPLES * np.dtype(np.complex64).itemsize


def describe(variant: str, root: str) -> str:
    """How a report names one variant of the built-in dataset."""
    count = len(sds.open(root))
    options = VARIANTS[variant] or "signal_dataset's default writer options, zstd"
    if variant.startswith("short"):
        shards = -(-count // _per_shard(variant, count))
        return (
            f"the built-in short records ({count} captures of {SHORT_SAMPLES}x2 int16 noise "
            f"in {shards} shards, {options})"
        )
    return f"the built-in dataset ({count} captures of {CHANNELS}x{SAMPLES} complex64 noise, {options})"


def _root(directory: str, variant: str, count: int) -> str:
    if variant.startswith("short"):
        return os.path.join(
            directory, f"bench-v{VERSION}-{_variant_count(variant, count)}x{SHORT_SAMPLES}x2-{variant}"
        )
    return os.path.join(directory, f"bench-v{VERSION}-{count}x{CHANNELS}x{SAMPLES}-{variant}")


def _disk_bytes(root: str) -> int:
    return sum(
        os.path.getsize(os.path.join(folder, name)) for folder, _, names in os.walk(root) for name in names
    )


def _is_complete(root: str, count: int) -> bool:
    try:
        return len(sds.open(root)) == count
    except Exception:  # anything unreadable is rebuilt, not trusted
        return False


def _write(root: str, variant: str, count: int, bar: Progress) -> None:
    writer_options = VARIANTS[variant]
    per_shard = _per_shard(variant, count)
    storage = sds.StorageOptions(writer_options=writer_options) if writer_options else None
    make = short_capture if variant.startswith("short") else capture
    step = _record_bytes(variant)  # the bar counts bytes: short records move it fairly

    def records(start: int, stop: int) -> Iterator[sds.Record]:
        for ordinal in range(start, stop):
            yield make(ordinal)
            bar.update(step)

    shards = [
        sds.write_shard(
            records(start, min(start + per_shard, count)), root, work_id=f"{n:06d}", options=storage
        )
        for n, start in enumerate(range(0, count, per_shard))
    ]
    sds.publish(root, shards, dataset_id="sds-loader-bench", snapshot_id="v1")


def ensure(
    records: int | None = None,
    *,
    progress: bool = True,
    directory: str | None = None,
    say: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
    variants: Sequence[str] = tuple(VARIANTS),
) -> dict[str, str]:
    """The built-in dataset's `variants` (name -> root; default all), writing any not yet cached.

    `say` is told where the dataset is and how large, once, before any write.
    """
    count = record_count(records)
    directory = cache_dir(directory)
    roots = {variant: _root(directory, variant, count) for variant in variants}
    missing = [
        variant for variant, root in roots.items() if not _is_complete(root, _variant_count(variant, count))
    ]
    how = f"--cache-dir or ${CACHE_DIR_ENV} puts it elsewhere; deleting it frees the space"
    if not missing:
        total = sum(_disk_bytes(root) for root in roots.values())
        say(f"the built-in dataset ({size(total)}) is cached in {directory} ({how})")
        return roots
    estimate = sum(_variant_count(variant, count) * _record_bytes(variant) for variant in missing)
    say(
        f"writing the built-in dataset ({', '.join(missing)}: about {size(estimate)}) "
        f"to {directory}, once ({how})"
    )
    os.makedirs(directory, exist_ok=True)
    with progress_bar(
        estimate, f"writing the built-in dataset to {directory}", in_bytes=True, enabled=progress
    ) as bar:
        for variant in missing:
            root = roots[variant]
            building = f"{root}.building-{os.getpid()}"
            shutil.rmtree(building, ignore_errors=True)
            _write(building, variant, _variant_count(variant, count), bar)
            shutil.rmtree(root, ignore_errors=True)
            try:
                os.rename(building, root)
            except OSError:
                # Another process finished the same dataset first; theirs is as good.
                shutil.rmtree(building, ignore_errors=True)
    return roots
