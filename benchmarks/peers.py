"""sds-loader beside other loaders, on the same records, in one run.

The bench's built-in records (64 KiB complex64 captures, zstd and
uncompressed; 1 KiB int16 captures and 8 KiB float32 frames, zstd) are read
once through BatchReader and written again in each peer's own format, at the
setting a user after random access would pick:

- Hugging Face `datasets`: an Arrow table saved with `save_to_disk`, opened
  memory-mapped with `load_from_disk`, `with_format("numpy")`, read with
  `ds[indices]` (a batch per call). The field is a flat fixed-size list
  (complex64 as float32 pairs: Arrow has no complex type), reshaped and
  viewed back. Arrow files hold no zstd here: every variant reads one
  uncompressed copy.
- MosaicML Streaming: MDS shards of 64 MB (the field as `bytes`, the label
  as `int64`), zstd or not as the variant; `StreamingDataset(...)[i]` per
  record, stacked. Compressed shards are decompressed by Streaming into its
  local directory on first use, so a warm pass reads that copy.
- LitData: `litdata.optimize` into 64 MB chunks (the field as its numpy
  array), zstd or not as the variant; `litdata.StreamingDataset(...)[i]` per
  record, stacked.
- Grain: `grain.sources.ArrayRecordDataSource` over the SDS dataset's own
  shards (they are ArrayRecord files: nothing is converted), a batch per
  `__getitems__`, each record's SafeTensors header, tensor and descriptor
  decoded in Python with json and numpy.

Every method reads the same seeded shuffled batches of `--batch-size`
(default 256) on one thread, from a warm page cache (each peer's files are
read once, untimed, by the runner's first pass over them); each row is the
median of three passes, each by a freshly opened reader after one untimed
batch, as `sds-loader bench` times its rows. BatchReader with
`verify_checksums="once"` reads a whole untimed epoch first, so its row is
the second epoch on; the "second epoch" rows do the same with True and
False, as a fresh reader's first epoch also fills its shards' mappings.
The bench's bounds (decompression alone into rows, memcpy, and the
reader's chunk code with and without the hash) are timed in the same run.
Rows that do not hold the records byte for byte (checked on the first
batch against signal_dataset) fail.

Not part of the package or of CI. Peers go into the development environment
only, under constraints that keep its numpy and torch:

    printf 'numpy<2.5\\ntorch==2.13.0\\n' > /tmp/peer-constraints.txt
    .venv/bin/python -m pip install -c /tmp/peer-constraints.txt datasets litdata transformers grain
    .venv/bin/python -m pip install --no-deps mosaicml-streaming      # it pins numpy<2.2
    .venv/bin/python -m pip install -c /tmp/peer-constraints.txt brotli python-snappy zstd catalogue
    .venv/bin/python -m pip uninstall -y torchvision   # PyPI's build does not load against torch+cpu

    .venv/bin/python benchmarks/peers.py --out peers.json
    .venv/bin/python benchmarks/peers.py --summarize run1.json run2.json run3.json

A peer that cannot be imported is a row that says so.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import struct
import sys
import time
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import signal_dataset as sds

from sds_loader.cli.bench import bounds, builtin
from sds_loader.cli.bench import plan as plans
from sds_loader.cli.bench.timing import Row, Runner, Skip, measure

SHARD_BYTES = 64 << 20
BASELINE = "sds_1"


# -- the records, once, from the SDS dataset ------------------------------------


def load_records(uri: str) -> tuple[np.ndarray, np.ndarray]:
    """Every record's samples and label, read (verified) through BatchReader."""
    from sds_loader import BatchReader

    reader = BatchReader(uri, fields=["samples"], targets=["label"], threads=2)
    batch = reader.read(np.arange(len(reader)))
    reader.close()
    return batch["samples"], batch["label"].astype(np.int64)


def as_stored(samples: np.ndarray) -> np.ndarray:
    """What Arrow can hold: complex64 as float32 pairs along the last axis."""
    return samples.view(np.float32) if samples.dtype == np.complex64 else samples


def as_read(stored: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return stored.view(np.complex64) if dtype == np.complex64 else stored


# -- conversions, each cached under the work directory ------------------------


def _fresh(path: str) -> bool:
    """Whether `path` must be written (a partial one is removed first)."""
    if os.path.exists(os.path.join(path, ".complete")):
        return False
    shutil.rmtree(path, ignore_errors=True)
    return True


def _done(path: str) -> None:
    open(os.path.join(path, ".complete"), "w").close()


def write_arrow(path: str, samples: np.ndarray, labels: np.ndarray) -> None:
    import datasets
    import pyarrow as pa

    if not _fresh(path):
        return
    # A flat fixed-size list per record: `with_format("numpy")` takes a batch
    # of them as one array without a copy per row, where an `Array2D`
    # column reads several times slower.
    stored = as_stored(samples).reshape(len(labels), -1)
    column = pa.FixedSizeListArray.from_arrays(pa.array(stored.reshape(-1)), stored.shape[1])
    table = pa.table({"samples": column, "label": pa.array(labels, type=pa.int64())})
    datasets.Dataset(table).save_to_disk(path)
    _done(path)


def write_mds(path: str, samples: np.ndarray, labels: np.ndarray, compression: str | None) -> None:
    streaming = _streaming()
    if not _fresh(path):
        return
    columns = {"samples": "bytes", "label": "int64"}
    with streaming.MDSWriter(
        out=path, columns=columns, compression=compression, size_limit=SHARD_BYTES, exist_ok=True
    ) as writer:
        for k in range(len(labels)):
            writer.write({"samples": samples[k].tobytes(), "label": int(labels[k])})
    _done(path)


_LIT_SAMPLES: np.ndarray | None = None
_LIT_LABELS: np.ndarray | None = None


def _lit_item(k: int) -> dict[str, Any]:
    assert _LIT_SAMPLES is not None and _LIT_LABELS is not None
    return {"samples": _LIT_SAMPLES[k], "label": int(_LIT_LABELS[k])}


def write_litdata(path: str, samples: np.ndarray, labels: np.ndarray, compression: str | None) -> None:
    import litdata

    global _LIT_SAMPLES, _LIT_LABELS
    if not _fresh(path):
        return
    _LIT_SAMPLES, _LIT_LABELS = samples, labels
    litdata.optimize(
        fn=_lit_item,
        inputs=list(range(len(labels))),
        output_dir=path,
        chunk_bytes=SHARD_BYTES,
        compression=compression,
        num_workers=1,
        start_method="fork",
    )
    _LIT_SAMPLES = _LIT_LABELS = None
    _done(path)


def _streaming() -> Any:
    # Streaming's package imports its vision and multimodal datasets, and
    # with them torchvision, which PyPI builds against CUDA torch: a CPU
    # torch cannot load it. The MDS reader and writer need neither.
    for name in ("streaming.vision", "streaming.multimodal"):
        sys.modules.setdefault(name, types.ModuleType(name))
    try:
        import streaming
    except ImportError as exc:
        raise Skip(f"skipped: mosaicml-streaming is not installed ({exc})") from None
    return streaming


# -- the runners ---------------------------------------------------------------


class _Peer(Runner):
    """Reads batches of indices into one stacked array of samples and one of labels."""

    def __init__(self, dtype: np.dtype, shape: tuple[int, ...]) -> None:
        self.dtype, self.shape = dtype, shape

    def read(self, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def run(self, batches: Sequence[np.ndarray]) -> Iterator[int]:
        for batch in batches:
            self.held = self.read(batch)
            yield batch.size


class _Arrow(_Peer):
    def __init__(self, path: str, dtype: np.dtype, shape: tuple[int, ...]) -> None:
        import datasets

        super().__init__(dtype, shape)
        complex_ = dtype == np.complex64
        self.stored_shape = (*shape[:-1], shape[-1] * 2) if complex_ else shape
        self.stored_dtype = np.dtype(np.float32) if complex_ else dtype
        self.dataset = datasets.load_from_disk(path).with_format("numpy")

    def read(self, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        got = self.dataset[batch.tolist()]
        # Its numpy format widens integers to int64: cast back, as a user must.
        stored = got["samples"].astype(self.stored_dtype, copy=False).reshape(batch.size, *self.stored_shape)
        return as_read(stored, self.dtype), got["label"]


class _Mds(_Peer):
    def __init__(self, path: str, local: str | None, dtype: np.dtype, shape: tuple[int, ...]) -> None:
        streaming = _streaming()
        from streaming.base.util import clean_stale_shared_memory

        super().__init__(dtype, shape)
        clean_stale_shared_memory()
        if local is None:
            self.dataset = streaming.StreamingDataset(local=path, shuffle=False, batch_size=256)
        else:  # compressed shards: Streaming decompresses them into `local`
            self.dataset = streaming.StreamingDataset(
                remote=path, local=local, shuffle=False, batch_size=256, keep_zip=True
            )

    def read(self, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out = np.empty((batch.size, *self.shape), dtype=self.dtype)
        labels = np.empty(batch.size, dtype=np.int64)
        for row, index in enumerate(batch.tolist()):
            item = self.dataset[index]
            out[row] = np.frombuffer(item["samples"], dtype=self.dtype).reshape(self.shape)
            labels[row] = item["label"]
        return out, labels

    def close(self) -> None:
        del self.dataset


class _Lit(_Peer):
    def __init__(self, path: str, dtype: np.dtype, shape: tuple[int, ...]) -> None:
        import litdata

        super().__init__(dtype, shape)
        self.dataset = litdata.StreamingDataset(input_dir=path)

    def read(self, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out = np.empty((batch.size, *self.shape), dtype=self.dtype)
        labels = np.empty(batch.size, dtype=np.int64)
        for row, index in enumerate(batch.tolist()):
            item = self.dataset[index]
            out[row] = item["samples"]
            labels[row] = item["label"]
        return out, labels


#: safetensors' dtype names for the dtypes these records hold.
SAFETENSORS_DTYPES = {"C64": np.complex64, "I16": np.int16, "F32": np.float32, "I32": np.int32}


def decode_sds_record(data: bytes, dtype: np.dtype, shape: tuple[int, ...]) -> tuple[np.ndarray, int]:
    """An SDS record's samples and label from its SafeTensors bytes, as a user
    of a generic record reader would decode it: the header's JSON, the field's
    tensor named by the descriptor, and the label from the descriptor's
    metadata. Nothing is verified beyond what numpy and json check."""
    (header_size,) = struct.unpack_from("<Q", data)
    header = json.loads(data[8 : 8 + header_size])
    body = 8 + header_size
    begin, end = header["__sds_descriptor__"]["data_offsets"]
    descriptor = json.loads(data[body + begin : body + end])
    entry = header[descriptor["fields"]["samples"]["tensor"]]
    begin, end = entry["data_offsets"]
    stored = np.dtype(SAFETENSORS_DTYPES[entry["dtype"]])
    samples = np.frombuffer(data, dtype=stored, count=(end - begin) // stored.itemsize, offset=body + begin)
    return samples.reshape(shape).astype(dtype, copy=False), int(descriptor["metadata"]["label"])


def _pin_process(cpus: set[int]) -> None:
    """Every thread of this process onto `cpus` (threads started later inherit it)."""
    for task in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(task), cpus)
        except OSError:
            pass  # a thread that has just ended


class _Grain(_Peer):
    """Grain's ArrayRecord source over the SDS dataset's own shards (no
    conversion: the shards are ArrayRecord files), `__getitems__` per batch,
    each record's SafeTensors decoded in Python (decode_sds_record)."""

    def __init__(self, uri: str, dtype: np.dtype, shape: tuple[int, ...], *, one_core: bool = False) -> None:
        import grain.sources

        from sds_loader.dataset import shard_table

        super().__init__(dtype, shape)
        # ArrayRecord reads a batch's records on its own thread pool (about
        # 1.6 cores busy here): held to one core, every thread of this process
        # shares the core the others' rows run on, until close().
        self.affinity = None
        if one_core and hasattr(os, "sched_setaffinity"):
            self.affinity = os.sched_getaffinity(0)
            _pin_process({min(self.affinity)})
        # Shards in dataset order: the source's index is then the ordinal.
        self.source = grain.sources.ArrayRecordDataSource(list(shard_table(sds.open(uri)).paths))

    def close(self) -> None:
        if self.affinity is not None:
            _pin_process(self.affinity)

    def read(self, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out = np.empty((batch.size, *self.shape), dtype=self.dtype)
        labels = np.empty(batch.size, dtype=np.int64)
        for row, data in enumerate(self.source.__getitems__(batch.tolist())):
            out[row], labels[row] = decode_sds_record(data, self.dtype, self.shape)
        return out, labels


class _Sds(Runner):
    def __init__(self, uri: str, threads: int, verify: bool | str, *, second_epoch: bool = False) -> None:
        from sds_loader import BatchReader

        self.reader = BatchReader(
            uri, fields=["samples"], targets=["label"], threads=threads, verify_checksums=verify
        )
        # An untimed epoch first: with "once" it verifies, and the timed one
        # trusts; any reader also has its shards' mappings filled by then (a
        # fresh reader's first epoch takes a page fault per few pages).
        if verify == "once" or second_epoch:
            for batch in np.array_split(np.arange(len(self.reader)), max(1, len(self.reader) // 256)):
                self.reader.read(batch)

    def read(self, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        got = self.reader.read(batch)
        return got["samples"], got["label"]

    def run(self, batches: Sequence[np.ndarray]) -> Iterator[int]:
        for batch in batches:
            self.held = self.reader.read(batch)
            yield batch.size

    def close(self) -> None:
        self.reader.close()


class _SdsGetitems(Runner):
    def __init__(self, uri: str) -> None:
        self.dataset = sds.open(uri)

    def read(self, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        records = self.dataset.__getitems__(batch.tolist())
        samples = np.stack([record["samples"].data for record in records])
        return samples, np.array([record.metadata["label"] for record in records])

    def run(self, batches: Sequence[np.ndarray]) -> Iterator[int]:
        for batch in batches:
            self.held = self.read(batch)
            yield batch.size


# -- the run ---------------------------------------------------------------------


def checked(open_runner: Callable[[], Any], reference: tuple[np.ndarray, np.ndarray], first: np.ndarray):
    """`open_runner` as measure() takes it, its first batch checked against signal_dataset's records."""
    state = {"checked": False}

    def open_checked(plan: plans.Plan) -> Runner:
        runner = open_runner()
        if not state["checked"]:
            samples, labels = runner.read(first)
            expected_samples, expected_labels = reference
            if samples.tobytes() != expected_samples[first].tobytes():
                raise AssertionError("samples differ from signal_dataset's records")
            if not np.array_equal(np.asarray(labels, dtype=np.int64), expected_labels[first]):
                raise AssertionError("labels differ from signal_dataset's records")
            state["checked"] = True
        return runner

    return open_checked


#: A peer whose untimed pass takes longer than this is not timed again.
SLOW_PASS_SECONDS = 20.0


def warm_pass(runner: _Peer, batches: Sequence[np.ndarray]) -> tuple[int, float] | None:
    """Reads every batch once; (records, seconds) when it ran past SLOW_PASS_SECONDS, else None."""
    records = 0
    started = time.perf_counter()
    for count in runner.run(batches):
        records += count
        if time.perf_counter() - started > SLOW_PASS_SECONDS:
            return records, time.perf_counter() - started
    return None


def warm(path: str) -> None:
    for folder, _, names in os.walk(path):
        for name in names:
            with open(os.path.join(folder, name), "rb", buffering=0) as handle:
                while handle.read(8 << 20):
                    pass


def run_variant(
    variant: str,
    uri: str,
    work: str,
    batch_size: int,
    batches: int,
    passes: int,
    only: set[str] | None = None,
) -> list[Row]:
    samples, labels = load_records(uri)
    dtype, shape = samples.dtype, samples.shape[1:]
    compression = "zstd" if builtin.COMPRESSION[variant] == "zstd" else None
    count = min(batches, len(labels) // batch_size)
    plan = plans.make(uri, batch_size=batch_size, batches=count, inputs="samples", target="label")
    plan.variant = variant
    first = plan.batches[0]
    reference = (samples, labels)
    here = os.path.join(work, variant)
    os.makedirs(here, exist_ok=True)

    def arrow() -> _Peer:
        write_arrow(os.path.join(here, "arrow"), samples, labels)
        return _Arrow(os.path.join(here, "arrow"), dtype, shape)

    def mds() -> _Peer:
        path = os.path.join(here, "mds")
        write_mds(path, samples, labels, compression)
        local = os.path.join(here, "mds-local") if compression else None
        return _Mds(path, local, dtype, shape)

    def lit() -> _Peer:
        write_litdata(os.path.join(here, "litdata"), samples, labels, compression)
        return _Lit(os.path.join(here, "litdata"), dtype, shape)

    methods: list[tuple[str, str, Callable[[], Any]]] = [
        ("sds_1", "sds-loader BatchReader, 1 thread", lambda: _Sds(uri, 1, True)),
        (
            "sds_1_once",
            'sds-loader BatchReader, 1 thread, verify_checksums="once"',
            lambda: _Sds(uri, 1, "once"),
        ),
        (
            "sds_1_off",
            "sds-loader BatchReader, 1 thread, verify_checksums=False",
            lambda: _Sds(uri, 1, False),
        ),
        (
            "sds_1_epoch2",
            "sds-loader BatchReader, 1 thread, second epoch",
            lambda: _Sds(uri, 1, True, second_epoch=True),
        ),
        (
            "sds_1_off_epoch2",
            "sds-loader BatchReader, 1 thread, verify_checksums=False, second epoch",
            lambda: _Sds(uri, 1, False, second_epoch=True),
        ),
        ("sds_2", "sds-loader BatchReader, 2 threads", lambda: _Sds(uri, 2, True)),
        ("hf", 'Hugging Face datasets, Arrow memory-mapped, with_format("numpy"), ds[indices]', arrow),
        ("mds", "MosaicML Streaming, MDS, ds[i]", mds),
        ("litdata", "LitData, ds[i]", lit),
        (
            "grain",
            "Grain ArrayRecordDataSource on the SDS shards, __getitems__ + SafeTensors decode",
            lambda: _Grain(uri, dtype, shape),
        ),
        (
            "grain_1",
            "Grain, as above, the process held to one core",
            lambda: _Grain(uri, dtype, shape, one_core=True),
        ),
        ("sds_getitems", "signal_dataset Dataset.__getitems__", lambda: _SdsGetitems(uri)),
    ]
    rows: list[Row] = []
    for key, label, make in methods:
        if only is not None and key not in only:
            continue
        # Conversion and one full untimed pass (decompressed copies made,
        # pages read) before any timing.
        try:
            runner = make()
            warm(here)
            slow = None
            if isinstance(runner, _Peer):
                slow = warm_pass(runner, plan.batches)
            runner.close()
            if slow is not None:
                # Too slow to time three passes in a run: the warm pass's own rate.
                records, seconds = slow
                note = f"warm pass only, {records} records: over {SLOW_PASS_SECONDS:.0f} s a pass"
                rows.append(Row(variant, key, label, records=records, seconds=seconds, note=note, passes=1))
                print(f"{variant:>12}  {label:<80} {_rate(rows[-1])} (warm pass only)", file=sys.stderr)
                continue
        except Skip as exc:
            rows.append(Row(variant, key, label, status="skipped", note=str(exc)))
            continue
        except Exception as exc:  # noqa: BLE001 - reported in the row
            rows.append(Row(variant, key, label, status="failed", note=f"{type(exc).__name__}: {exc}"))
            continue
        rows.append(measure(plan, key, label, checked(make, reference, first), progress=False, passes=passes))
        print(f"{variant:>12}  {label:<80} {_rate(rows[-1])}", file=sys.stderr)
    for key, label, open_runner in [
        ("bound_decompress", "bound: decompression alone into rows", bounds.decompress),
        ("bound_memcpy", "bound: memcpy of the records", bounds.memcpy),
        (
            "ceiling_verified",
            "ceiling: the reader's chunk code, HighwayHash + into rows",
            bounds.verified_read,
        ),
        ("ceiling_unverified", "ceiling: the reader's chunk code, into rows", bounds.unverified_read),
    ]:
        if only is not None and key not in only:
            continue
        rows.append(measure(plan, key, label, open_runner, progress=False, passes=passes))
        print(f"{variant:>12}  {label:<80} {_rate(rows[-1])}", file=sys.stderr)
    return rows


def _rate(row: Row) -> str:
    rate = row.records_per_s
    return f"{rate:,.0f}/s" if rate is not None else f"{row.status}: {row.note}"


def summarize(paths: Sequence[str]) -> str:
    """Median and range of each row's records/s across runs, and its ratio to BatchReader at 1 thread."""
    runs = [json.load(open(path)) for path in paths]
    lines = [
        "| variant | method | records/s (median) | range | x BatchReader, 1 thread (median) |",
        "|---|---|---:|---:|---:|",
    ]
    for variant in runs[0]["variants"]:
        rows = runs[0]["rows"][variant]
        for key, label in [(row["key"], row["label"]) for row in rows]:
            rates, ratios = [], []
            for run in runs:
                by_key = {row["key"]: row for row in run["rows"][variant]}
                rate, base = by_key[key]["records_per_s"], by_key.get(BASELINE, {}).get("records_per_s")
                if rate is not None:
                    rates.append(rate)
                    if base:
                        ratios.append(rate / base)
            if not rates:
                note = runs[0]["rows"][variant][[r["key"] for r in rows].index(key)]["note"]
                lines.append(f"| {variant} | {label} | - | - | {note} |")
                continue
            lines.append(
                f"| {variant} | {label} | {statistics.median(rates):,.0f} | "
                f"{min(rates):,.0f}-{max(rates):,.0f} | {statistics.median(ratios):.2f} |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--records", type=int, default=2048, help="64 KiB captures (x16 short ones, x8 frames)"
    )
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--batches", type=int, default=8, help="per pass, none read twice")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--variants", default="zstd,uncompressed,short-zstd,frames-zstd")
    parser.add_argument("--cache-dir", default=None, help="where the built-in dataset is cached")
    parser.add_argument("--work-dir", default="/tmp/sds-loader-peers", help="the peers' converted copies")
    parser.add_argument("--out", default=None, help="write every row as JSON here")
    parser.add_argument("--only", default=None, help="comma-separated row keys to time (default: all)")
    parser.add_argument("--summarize", nargs="+", metavar="JSON", help="median and range of earlier runs")
    args = parser.parse_args(argv)
    if args.summarize:
        print(summarize(args.summarize))
        return 0
    try:
        import pyarrow

        pyarrow.set_cpu_count(1)
        pyarrow.set_io_thread_count(1)
    except ImportError:
        pass
    variants = args.variants.split(",")
    only = set(args.only.split(",")) if args.only else None
    roots = builtin.ensure(args.records, directory=args.cache_dir, variants=variants, progress=False)
    result: dict[str, Any] = {
        "command": " ".join(sys.argv),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "python": platform.python_version(),
        "batch_size": args.batch_size,
        "batches": args.batches,
        "variants": variants,
        "rows": {},
    }
    for variant in variants:
        rows = run_variant(
            variant, roots[variant], args.work_dir, args.batch_size, args.batches, args.passes, only
        )
        result["rows"][variant] = [
            {
                "key": r.key,
                "label": r.label,
                "status": r.status,
                "note": r.note,
                "records_per_s": r.records_per_s,
            }
            for r in rows
        ]
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(result, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
