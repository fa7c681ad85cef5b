"""Run the benchmark: plan each variant, warm the page cache, time every method.

The order is fixed and the same for every variant so that two runs (or two
machines) produce comparable tables: reference readers first, then this
package, then the bounds. All methods of a variant read the same batches from
a page cache warmed beforehand, so the table compares CPU work, not disk, and
each row is the median of the same number of passes, each by a freshly opened
reader (timing.py).
"""

from __future__ import annotations

import datetime
import os
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from sds_loader.cli import native_tools
from sds_loader.cli.bench import bounds, builtin, cold, methods, report, small_batches
from sds_loader.cli.bench import plan as planning
from sds_loader.cli.bench.plan import Plan
from sds_loader.cli.bench.timing import PASSES, PASSES_NOTE, Row, Runner, measure
from sds_loader.cli.progress import progress as progress_bar
from sds_loader.reader import default_threads

#: The DataLoader worker counts timed for sds_loader.torch.
WORKER_COUNTS = (0, 2)
#: The files a run writes, in its results directory.
RESULT_FILES = ("bench.json", "bench.md", "bench.png")
#: Where runs without --out put their dated results directories.
DEFAULT_RESULTS = "bench-results"


@dataclass
class BenchConfig:
    #: A dataset to time; None for the built-in one (every variant of builtin.VARIANTS).
    path: str | None = None
    batch_size: int = 256
    #: Threads for the "all cores" BatchReader row; None for os.cpu_count().
    threads: int | None = None
    batches: int | None = None
    #: Where results go; None for a new dated folder under bench-results/.
    out: str | None = None
    inputs: str | None = None
    target: str | None = None
    #: Size of the built-in dataset; None for builtin.RECORDS (or its env override).
    builtin_records: int | None = None
    #: Where the built-in dataset is cached; None for builtin.cache_dir()'s default.
    cache_dir: str | None = None
    progress: bool = True
    #: Drop the shards' pages before every pass and time thread counts (cold.py).
    cold: bool = False
    command: str = "sds-loader bench"


@dataclass
class BenchResult:
    rows: list[Row]
    plans: dict[str, Plan]
    document: dict[str, Any]
    files: dict[str, str] = field(default_factory=dict)
    chart_problem: str | None = None

    @property
    def failed(self) -> list[Row]:
        return [row for row in self.rows if row.status == "failed"]


def method_table(threads: int) -> list[tuple[str, str, Callable[[Plan], Runner]]]:
    """(key, label, runner factory) for every row of a variant, in table order."""
    rows = [
        ("guide_adapter", "SDS guide adapter, DataLoader, per index", methods.guide_adapter),
        ("sds_getitems", "SDS Dataset.__getitems__ + default_collate", methods.sds_getitems),
        ("array_record_read", "array_record read(indices)", methods.array_record_read),
        ("batchreader_1", "BatchReader.read, 1 thread", methods.batch_reader(1)),
        (
            "batchreader_1_unverified",
            "BatchReader.read, 1 thread, checksums off",
            methods.batch_reader(1, verify_checksums=False),
        ),
        (
            "batchreader_1_untimed",
            "BatchReader.read, 1 thread, stage times off",
            methods.batch_reader(1, stage_sampling=0),
        ),
        (
            "batchreader_all",
            f"BatchReader.read, {threads} thread{'s' * (threads != 1)}",
            methods.batch_reader(threads),
        ),
    ]
    rows += small_batches.method_rows()
    # In the main process the dataset's reader takes the default thread
    # count; in a DataLoader worker, one.
    in_main = small_batches.threads_label(default_threads())
    rows += [
        (
            f"torch_w{workers}",
            f"SDSTorchDataset + collate, {workers} workers, "
            + (in_main if workers == 0 else "1 thread each"),
            methods.torch_loader(workers),
        )
        for workers in WORKER_COUNTS
    ]
    rows += [
        ("bound_decompress", "bound: decompression alone", bounds.decompress),
        ("bound_memcpy", "bound: memcpy of the records", bounds.memcpy),
        ("bound_read", "ceiling: pread + hash (+ decompress) into rows", bounds.verified_read),
        ("bound_read_unverified", "ceiling: pread (+ decompress) into rows", bounds.unverified_read),
    ]
    return rows


def plans_for(config: BenchConfig) -> dict[str, Plan]:
    if config.path is not None:
        one = planning.make(
            config.path,
            batch_size=config.batch_size,
            batches=config.batches,
            inputs=config.inputs,
            target=config.target,
        )
        return {one.variant: one}
    roots = builtin.ensure(config.builtin_records, progress=config.progress, directory=config.cache_dir)
    return {
        variant: planning.make(
            root,
            batch_size=config.batch_size,
            batches=config.batches,
            inputs=config.inputs,
            target=config.target,
            variant=variant,
            compression=builtin.COMPRESSION[variant],
            source=builtin.describe(variant, root),
        )
        for variant, root in roots.items()
    }


def warm_page_cache(plans: dict[str, Plan], *, progress: bool) -> None:
    """Read every shard file the batches touch once, so no row pays for the disk."""
    files = sorted({shard.path for plan in plans.values() for shard in plan.touched()})
    total = sum(os.path.getsize(path) for path in files)
    with progress_bar(total, "warming page cache", in_bytes=True, leave=False, enabled=progress) as bar:
        for path in files:
            with open(path, "rb", buffering=0) as handle:
                while chunk := handle.read(8 << 20):
                    bar.update(len(chunk))


def context(config: BenchConfig, threads: int) -> dict[str, Any]:
    def version(package: str) -> str | None:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return None

    return {
        "format": "sds-loader-bench/1",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": config.command,
        "batch_size": config.batch_size,
        "threads": threads,
        "cold": config.cold,
        "passes": PASSES,
        "passes_note": PASSES_NOTE,
        "machine": {
            "cpu": _cpu_model(),
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "python": sys.version.split()[0],
        },
        "versions": {
            name: version(name) for name in ("sds-loader", "signal-dataset", "array-record", "torch", "numpy")
        },
        "native": native_tools.unavailable_reason("shard_summary") or "built",
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def run(config: BenchConfig) -> BenchResult:
    if config.batch_size < 1:
        raise ValueError(f"--batch-size must be at least 1, not {config.batch_size}")
    if config.batches is not None and config.batches < 1:
        raise ValueError(f"--batches must be at least 1, not {config.batches}")
    threads = config.threads or os.cpu_count() or 1
    if threads < 1:
        raise ValueError(f"--threads must be at least 1, not {threads}")
    out = results_dir(config.out)
    plans = plans_for(config)
    if config.cold:
        table = cold.method_table(default_threads())
    else:
        table = method_table(threads)
        warm_page_cache(plans, progress=config.progress)
    rows = [
        measure(plan, key, label, open_runner, progress=config.progress)
        for plan in plans.values()
        for key, label, open_runner in table
    ]
    report.derive(rows, plans)
    document = report.document(rows, plans, context(config, threads))
    result = BenchResult(rows, plans, document)
    os.makedirs(out, exist_ok=True)
    result.files["json"] = os.path.join(out, RESULT_FILES[0])
    report.write_json(result.files["json"], document)
    result.files["markdown"] = os.path.join(out, RESULT_FILES[1])
    with open(result.files["markdown"], "w", encoding="utf-8") as handle:
        handle.write(readme_section(result))
    chart_path = os.path.join(out, RESULT_FILES[2])
    result.chart_problem = report.chart(chart_path, rows, plans)
    if result.chart_problem is None:
        result.files["chart"] = chart_path
    return result


def results_dir(out: str | None) -> str:
    """Where this run's results go: `out`, or a new dated folder; never over earlier results.

    Checked before anything is timed, so a clash costs nothing.
    """
    if out is None:
        stamp = datetime.datetime.now().strftime("%Y-%m-%d-%H%M%S")
        base = candidate = os.path.join(DEFAULT_RESULTS, stamp)
        copies = 1
        while os.path.lexists(candidate):
            copies += 1
            candidate = f"{base}-{copies}"
        return candidate
    if os.path.lexists(out) and not os.path.isdir(out):
        raise FileExistsError(f"--out {out} is a file; pass a directory")
    earlier = [name for name in RESULT_FILES if os.path.lexists(os.path.join(out, name))]
    if earlier:
        raise FileExistsError(
            f"--out {out} already holds results of an earlier run ({', '.join(earlier)}); "
            "pass a new directory, or remove those files to replace them"
        )
    return out


def results_file(out: str | None, name: str) -> str:
    """The path of a bench's one results file `name` in `out` (or a new dated folder), refused
    where an earlier run left one: never over earlier results."""
    written = os.path.join(results_dir(out), name)
    if os.path.lexists(written):
        raise FileExistsError(
            f"{written} holds an earlier run's rows; pass a new --out, or remove it to replace it"
        )
    return written


def write_results(written: str, text: str) -> str:
    """`text` into the results file `written` (see results_file); what the command prints."""
    os.makedirs(os.path.dirname(written), exist_ok=True)
    with open(written, "w", encoding="utf-8") as handle:
        handle.write(text)
    return f"{text}\nrows: {written}"


def stderr_lines(enabled: bool) -> Callable[[str], None]:
    """What a bench says as it goes: whole lines to stderr, or nothing (--no-progress)."""
    if not enabled:
        return lambda line: None
    return lambda line: print(line, file=sys.stderr, flush=True)


def readme_section(result: BenchResult) -> str:
    """The markdown a README's benchmark section holds: when, how, where, the table."""
    doc = result.document
    machine = doc["machine"]
    return (
        f"Measured {doc['date'][:10]} with `{doc['command']}` on {machine['cpu']} "
        f"({machine['cpu_count']} cores), Python {machine['python']}, "
        f"signal-dataset {doc['versions']['signal-dataset']}, "
        f"array-record {doc['versions']['array-record']}, "
        f"torch {doc['versions']['torch']}.\n\n"
        + report.legend(result.plans, doc["batch_size"]).replace("\n", "  \n")
        + "\n\n"
        + report.markdown(result.rows)
        + "\n"
    )
