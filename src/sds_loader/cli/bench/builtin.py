"""The built-in benchmark datasets, written once and cached per user.

`sds-loader bench` with no PATH needs datasets that look like the ones the
loader is for: captures of 2 x 4096 complex64 noise (64 KiB each) with an
integer label, written through signal_dataset's own writer twice, as the
default zstd shards and as an uncompressed copy, because the two bound the
reader differently (decompression against memory bandwidth) and a user with
either kind wants to see their case; and the small records real radio
corpora mostly hold, where what a reader spends per record and per shard,
not per byte, decides its speed, each in 256 zstd shards: RadioML-style
records of 256 x 2 int16 (1 KiB), sixteen for each capture (a quarter of
the captures' bytes), and RadioML's frames of 1,024 complex samples as
1024 x 2 float32 (8 KiB), eight for each capture (the captures' bytes),
the size most radio datasets store. One `ShortRecords` says what each small
kind holds, so another kind is a line, not another branch.

Writing 2 x 256 MiB of captures, 64 MiB of short records and 256 MiB of
frames takes some seconds, so the result is cached, keyed by every
parameter that changes its bytes, in the first of: `--cache-dir`,
$SDS_LOADER_CACHE_DIR, $XDG_CACHE_HOME/sds-loader, ~/.cache/sds-loader. Close
to a gigabyte is not written anywhere unannounced: `ensure` says where and how
much, before writing and when reusing. A dataset is built in a temporary sibling
directory and renamed into place only when complete, so an interrupted build
is never mistaken for a cached one.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

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
    "frames-zstd": None,
}
#: Variant name -> the compression its writer options produce.
COMPRESSION = {"zstd": "zstd", "uncompressed": "none", "short-zstd": "zstd", "frames-zstd": "zstd"}
#: A small dataset's short-record shards keep at least this many records each.
SHORT_MIN_PER_SHARD = 16


@dataclass(frozen=True)
class ShortRecords:
    """One kind of small record: `per_capture` of them for each capture of the 64 KiB variants.

    Each record is `samples` x 2 (time, then I and Q, as RadioML stores them)
    of seeded Gaussian noise in `dtype`, with the label and SNR the captures
    carry. Counting them per capture keeps `--builtin-records` one knob for
    every variant; `shards` spreads them as a real corpus of small records is
    spread, so the per-shard costs show as they would there rather than
    vanishing into a few large shards.
    """

    #: How a report names the records ("the built-in short records").
    noun: str
    #: Record ids are f"{id_prefix}-{ordinal:08d}".
    id_prefix: str
    samples: int
    dtype: str
    per_capture: int
    shards: int
    #: The noise's standard deviation: integers need a wide one to use more than a few levels.
    scale: float

    @property
    def record_bytes(self) -> int:
        return self.samples * 2 * np.dtype(self.dtype).itemsize

    def record(self, ordinal: int) -> sds.Record:
        """Record `ordinal`, the same bytes every time (its seed is its ordinal)."""
        rng = np.random.default_rng(ordinal)
        data = rng.normal(0.0, self.scale, size=(self.samples, 2)).astype(self.dtype)
        axes = (sds.Axis("time", self.samples), sds.Axis("iq", 2))
        return sds.Record(
            id=f"{self.id_prefix}-{ordinal:08d}",
            fields={"samples": sds.Field(data, axes=axes)},
            metadata={"label": ordinal % CLASSES, "snr_db": float(rng.uniform(-5.0, 20.0))},
        )


#: 256 x 2 int16 (1 KiB), sixteen a capture: where per-record costs weigh most.
SHORT = ShortRecords("short records", "short", 256, "int16", per_capture=16, shards=256, scale=2000.0)
#: RadioML's frames of 1,024 complex samples as 1024 x 2 float32 (8 KiB), eight a capture.
FRAMES = ShortRecords("frames", "frame", 1024, "float32", per_capture=8, shards=256, scale=1.0)
#: The variants of small records, by name; the others hold the 64 KiB captures.
SHORT_RECORDS: dict[str, ShortRecords] = {"short-zstd": SHORT, "frames-zstd": FRAMES}


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
    return SHORT.record(ordinal)


def write_once(
    root: str,
    count: int,
    make: Callable[[int], sds.Record],
    *,
    per_shard: int,
    dataset_id: str,
    writer_options: str | None = None,
) -> str:
    """`root`, holding `count` records `make(ordinal)`, written unless a complete copy is there.

    Built in a temporary sibling directory and renamed into place only when
    complete, so an interrupted build is never mistaken for a cached one.
    """
    if _is_complete(root, count):
        return root
    building = f"{root}.building-{os.getpid()}"
    shutil.rmtree(building, ignore_errors=True)
    storage = sds.StorageOptions(writer_options=writer_options) if writer_options else None
    shards = [
        sds.write_shard(
            (make(i) for i in range(first, min(first + per_shard, count))),
            building,
            work_id=f"{n:06d}",
            options=storage,
        )
        for n, first in enumerate(range(0, count, per_shard))
    ]
    sds.publish(building, shards, dataset_id=dataset_id, snapshot_id="v1")
    _into_place(building, root)
    return root


def _into_place(building: str, root: str) -> None:
    """The complete dataset `building` renamed to `root`, replacing what was there."""
    shutil.rmtree(root, ignore_errors=True)
    try:
        os.rename(building, root)
    except OSError:
        # Another process finished the same dataset first; theirs is as good.
        shutil.rmtree(building, ignore_errors=True)


def warm(roots: Sequence[str]) -> None:
    """Read every file of the datasets at `roots` once, so that no timed row pays for the disk."""
    for root in roots:
        for folder, _, names in os.walk(root):
            for name in names:
                with open(os.path.join(folder, name), "rb", buffering=0) as handle:
                    while handle.read(8 << 20):
                        pass


def _variant_count(variant: str, count: int) -> int:
    kind = SHORT_RECORDS.get(variant)
    return count * kind.per_capture if kind is not None else count


def _per_shard(variant: str, count: int) -> int:
    kind = SHORT_RECORDS.get(variant)
    if kind is not None:
        # kind.shards shards at full size; a test's small dataset keeps some records a shard.
        return max(SHORT_MIN_PER_SHARD, count // kind.shards)
    return min(RECORDS_PER_SHARD, max(1, count // 4))


def _record_bytes(variant: str) -> int:
    kind = SHORT_RECORDS.get(variant)
    return kind.record_bytes if kind is not None else CHANNELS * SAMPLES * np.dtype(np.complex64).itemsize


def describe(variant: str, root: str) -> str:
    """How a report names one variant of the built-in dataset."""
    count = len(sds.open(root))
    options = VARIANTS[variant] or "signal_dataset's default writer options, zstd"
    kind = SHORT_RECORDS.get(variant)
    if kind is not None:
        shards = -(-count // _per_shard(variant, count))
        return (
            f"the built-in {kind.noun} ({count} captures of {kind.samples}x2 {kind.dtype} noise "
            f"in {shards} shards, {options})"
        )
    return f"the built-in dataset ({count} captures of {CHANNELS}x{SAMPLES} complex64 noise, {options})"


def _root(directory: str, variant: str, count: int) -> str:
    kind = SHORT_RECORDS.get(variant)
    if kind is not None:
        # The dtype is not in the name: the variant's name already tells the kinds apart.
        return os.path.join(
            directory, f"bench-v{VERSION}-{_variant_count(variant, count)}x{kind.samples}x2-{variant}"
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
    kind = SHORT_RECORDS.get(variant)
    make = kind.record if kind is not None else capture
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
            _into_place(building, root)
    return roots
