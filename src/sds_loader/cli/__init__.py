"""The `sds-loader` command: bench, inspect, verify, synth.

The command line is a package of its own beside the library (BatchReader, the
torch adapter), which never imports it. Each subcommand lives in its own
module of this package; this file only parses arguments,
calls it, and turns the errors a user can fix (a wrong path, a missing build,
a bad option) into one line and exit status 2 rather than a traceback.
Exit status 1 is reserved for what the command found: a corrupt dataset, or a
benchmark row that failed.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence

import signal_dataset as sds

from sds_loader._version import __version__
from sds_loader.cli import synth as synth_defaults
from sds_loader.cli.native_tools import NativeUnavailable


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _non_negative_float(text: str) -> float:
    value = _number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value:g}")
    return value


def _positive_float(text: str) -> float:
    value = _number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {value:g}")
    return value


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="sds-loader",
        description=(
            "Read signal_dataset (SDS) datasets in batches: benchmark, inspect and verify them, "
            "or write a synthetic one to try."
        ),
    )
    top.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = top.add_subparsers(dest="command", metavar="COMMAND", required=True)

    bench = commands.add_parser(
        "bench",
        help="time sds-loader against signal_dataset and the hardware bounds",
        description=(
            "Time reading the same shuffled batches through signal_dataset's own readers, "
            "array_record, BatchReader and the PyTorch adapter, against the bounds of "
            "decompression and memcpy. Without PATH, times the built-in datasets, written once "
            "to --cache-dir (about 0.9 GB): 4096 captures of 2x4096 complex64 (64 KiB) as zstd "
            "and as uncompressed shards, 65,536 records of 256x2 int16 (1 KiB; short-zstd) and "
            "32,768 frames of 1024x2 float32 (8 KiB; frames-zstd), each in 256 zstd shards. "
            "Prints a table and writes bench.json, bench.md and "
            "bench.png to --out. No pass reads a record twice, so a batch size or count "
            "larger than the dataset allows is refused."
        ),
    )
    bench.add_argument("path", nargs="?", metavar="PATH", help="dataset to time (default: the built-in one)")
    bench.add_argument(
        "--batch-size",
        type=_positive,
        default=None,
        help="records per batch (default 256; 64 for a dataset in object storage)",
    )
    bench.add_argument(
        "--threads",
        type=_positive,
        default=None,
        help="threads for the multi-threaded BatchReader row (default: all cores)",
    )
    bench.add_argument(
        "--batches",
        type=_positive,
        default=None,
        help=(
            "batches timed per method (default: 16, or as many as hold 16,384 records where those "
            "are short; one epoch at most)"
        ),
    )
    bench.add_argument(
        "--out",
        metavar="DIR",
        default=None,
        help="where to write results; refused if it holds earlier ones (default: a new "
        "bench-results/DATE-TIME)",
    )
    bench.add_argument(
        "--cache-dir",
        metavar="DIR",
        default=None,
        help="where the built-in dataset is cached (default: $SDS_LOADER_CACHE_DIR, else "
        "$XDG_CACHE_HOME/sds-loader, else ~/.cache/sds-loader); not the node cache of a dataset "
        "in object storage, which is --node-cache",
    )
    bench.add_argument(
        "--node-cache",
        metavar="DIR",
        default=None,
        help="for a dataset in object storage: time epoch 1 and epoch 2 through a node cache "
        "(BatchReader's cache_dir) made under DIR, with ShardAwareSampler and shuffled, against "
        "the same records and order from a local copy, and without a cache",
    )
    bench.add_argument(
        "--inputs", metavar="FIELD", help='field to batch (default "samples", else the largest field)'
    )
    bench.add_argument(
        "--target", metavar="KEY", help='numeric metadata key to batch as target (default "label" if present)'
    )
    bench.add_argument(
        "--cold",
        action="store_true",
        help="drop the shards' pages from the page cache before every pass and time "
        "BatchReader at its default thread count and at 1, 2, 8 and 32 threads",
    )
    bench.add_argument("--no-progress", action="store_true", help="no progress bars")
    bench.add_argument(
        "--requests-in-flight",
        type=_positive,
        default=None,
        help="ranged GETs in flight for a dataset in object storage (default 64)",
    )
    bench.add_argument(
        "--endpoint",
        metavar="URL",
        default=None,
        help="for a dataset in S3: send every reader's requests to URL (your own store, or a "
        "proxy in front of it) instead of the endpoint the store is configured with",
    )
    # Deprecated: the shaping proxy is no longer installed (benchmarks/remote_shaped.py).
    bench.add_argument("--latency-ms", type=_non_negative_float, default=None, help=argparse.SUPPRESS)
    bench.add_argument("--bandwidth-mbps", type=_positive_float, default=None, help=argparse.SUPPRESS)
    bench.add_argument(
        "--loader",
        action="store_true",
        help=(
            "time whole DataLoader epochs instead: 2 workers against 0, CPU per batch spent "
            "delivering it, and ShardAwareSampler against shuffle=True with shard pages dropped"
        ),
    )
    bench.add_argument(
        "--windows",
        action="store_true",
        help=(
            "time 4,096-sample windows at random starts of a built-in long-capture dataset "
            "(1 Mi samples each) against signal_dataset reading whole captures and slicing"
        ),
    )
    bench.add_argument(
        "--mixture",
        action="store_true",
        help=(
            "time a 70/30 Mixture of the built-in zstd and uncompressed datasets against each "
            "read alone, as a share of their time-weighted mean rate"
        ),
    )
    bench.add_argument(
        "--augment",
        action="store_true",
        help=(
            "time the augmentation chain phase + frequency shift + time shift + AWGN inside the read "
            "(augment=) against the same chain after it, record by record in numpy and in torch ops over "
            "the batch, at 1 and --threads (default 2) threads on 8 KiB and 64 KiB zstd records, and "
            "resampling inside the read against scipy's resample_poly; each as a share of the plain read"
        ),
    )
    bench.add_argument(
        "--annotations",
        action="store_true",
        help=(
            "time what an annotation set's rows add to a batch read of windows, against "
            "signal_dataset's AnnotationSet read row by row"
        ),
    )
    bench.add_argument(
        "--ray",
        action="store_true",
        help=(
            "time a full pass through Ray Data: sds_loader.ray.read_sds against BatchReader alone "
            "and against ray.data.range(n).map_batches reading through signal_dataset (16,384 "
            "built-in zstd captures; needs the ray extra)"
        ),
    )
    bench.add_argument(
        "--shards",
        type=_positive,
        default=None,
        metavar="N",
        help=(
            "time opening a built-in dataset of N shards of 16 records (written once): the reader, "
            "its first batch and the first batch through 2 DataLoader workers (fork and spawn), "
            "against signal_dataset's open"
        ),
    )
    bench.add_argument(
        "--profile",
        action="store_true",
        help="also print each row's time per stage (plan, wait, hash, decompress, parse, copy, "
        "Python) as shares of its reads' time, from the readers' stage times",
    )
    bench.add_argument(
        "--plot",
        metavar="FILE",
        default=None,
        help="with --profile: draw each row's stage shares as stacked bars into FILE (PNG; "
        "needs matplotlib, the bench extra)",
    )
    # How many long captures --windows writes (tests).
    bench.add_argument("--windows-captures", type=_positive, default=None, help=argparse.SUPPRESS)
    # Shrinks the built-in dataset (tests; also $SDS_LOADER_BENCH_RECORDS).
    bench.add_argument("--builtin-records", type=_positive, default=None, help=argparse.SUPPRESS)

    inspect = commands.add_parser(
        "inspect",
        help="records, fields, shards, compression and what it costs",
        description=(
            "Show a dataset's records, fields (dtype and shape), and each data shard's "
            "compression, group size and bytes on disk against decoded bytes, with a "
            "note when the compression costs more read speed than the space it saves."
        ),
    )
    inspect.add_argument("path", metavar="PATH", help="dataset root")
    inspect.add_argument("--json", action="store_true", help="print the report as JSON")

    verify = commands.add_parser(
        "verify",
        help="check every chunk hash and record header; exit 1 if anything is corrupt",
        description=(
            "Check every chunk hash and every record's SafeTensors header of every data "
            "shard, natively, and report each corrupt shard and record. Exit status 0 "
            "when clean, 1 when anything is corrupt, 2 when the check could not run."
        ),
    )
    verify.add_argument("path", metavar="PATH", help="dataset root")
    verify.add_argument("--json", action="store_true", help="print the report as JSON")
    verify.add_argument("--no-progress", action="store_true", help="no progress bar")

    synth = commands.add_parser(
        "synth",
        help="write a labelled dataset of synthetic captures to try",
        description=(
            "Write a dataset of synthetic captures (BPSK, QPSK, 16-QAM and FM, each at one of "
            "several SNRs, with a random phase and frequency offset) with signal_dataset's "
            "writer: a complex64 field 'samples' and metadata 'label', 'modulation' and "
            "'snr_db'. PATH must not exist yet."
        ),
    )
    synth.add_argument("path", metavar="PATH", help="dataset root to create")
    synth.add_argument(
        "--records",
        type=_positive,
        default=synth_defaults.DEFAULT_RECORDS,
        help=f"captures to write (default {synth_defaults.DEFAULT_RECORDS})",
    )
    synth.add_argument(
        "--length",
        type=_positive,
        default=synth_defaults.DEFAULT_LENGTH,
        help=f"samples per capture (default {synth_defaults.DEFAULT_LENGTH})",
    )
    synth.add_argument(
        "--variable-length",
        action="store_true",
        help="draw each capture's length between LENGTH/2 and LENGTH (records then differ in shape)",
    )
    synth.add_argument(
        "--writer-options",
        metavar="OPTIONS",
        help=(
            'ArrayRecord writer options, e.g. "group_size:1,uncompressed" (default: signal_dataset\'s, zstd)'
        ),
    )
    synth.add_argument("--seed", type=int, default=0, help="seed of the captures (default 0)")
    synth.add_argument(
        "--bursts",
        action="store_true",
        help="captures of noise holding 0-4 bursts, with an annotation set 'bursts' of their "
        "intervals and frequencies (for detection)",
    )
    synth.add_argument("--no-progress", action="store_true", help="no progress bar")
    return top


def _bench_remote(args: argparse.Namespace) -> int:
    from sds_loader.cli.bench import remote
    from sds_loader.cli.bench.run import results_dir

    if args.cache_dir is not None:
        raise ValueError(
            "--cache-dir is where the built-in dataset is written, and a dataset in object storage "
            "needs none; for its node cache (BatchReader's cache_dir), pass --node-cache DIR"
        )
    out = results_dir(args.out)  # checked before anything is timed
    if args.node_cache is not None:
        from sds_loader.cli.bench import cache_epochs

        epochs = cache_epochs.run(
            args.path,
            cache_dir=args.node_cache,
            batch_size=args.batch_size or 64,
            requests_in_flight=args.requests_in_flight,
            endpoint=args.endpoint,
        )
        print(cache_epochs.text(epochs))
        print()
        print(f"json: {cache_epochs.write(epochs, out)}")
        return 0
    result = remote.run(
        args.path,
        batch_size=args.batch_size or 64,
        batches=args.batches or 5,
        requests_in_flight=args.requests_in_flight,
        fields=(args.inputs,) if args.inputs else None,
        endpoint=args.endpoint,
    )
    print(remote.legend(result))
    print()
    print(remote.text(result))
    print()
    print(f"json: {remote.write(result, out)}")
    return 0


def _bench(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from sds_loader.cli.bench import BenchConfig, remote, report, run

    if args.latency_ms is not None or args.bandwidth_mbps is not None:
        raise ValueError(
            "--latency-ms and --bandwidth-mbps went with the shaping proxy, which is no longer "
            "installed: from a checkout, `python benchmarks/remote_shaped.py URI --endpoint URL "
            "--latency-ms MS --bandwidth-mbps MB_S` runs this bench through it (docs/object-storage.md)"
        )
    if remote.is_remote(args.path):
        return _bench_remote(args)
    if args.endpoint is not None:
        raise ValueError("--endpoint is where a dataset in S3 is read from (s3://...); a local one has none")
    if args.node_cache is not None:
        raise ValueError(
            "--node-cache times the node cache of a dataset in object storage (s3://... or gs://...); "
            "a local dataset is on this machine's disk already"
        )
    if args.windows:
        from sds_loader.cli.bench import windows

        options = ["--threads", str(args.threads or 1)]
        if args.cache_dir:
            options += ["--cache-dir", args.cache_dir]
        if args.windows_captures:
            options += ["--captures", str(args.windows_captures), "--passes", "1"]
        return windows.main(options)
    if args.shards:
        import os

        from sds_loader.cli.bench import builtin, many_shards

        root = os.path.join(builtin.cache_dir(args.cache_dir), f"many-shards-{args.shards}")
        return many_shards.main([root, "--shards", str(args.shards), "--repeat", "3"])
    if args.ray:
        from sds_loader.cli.bench import ray_pass

        options = ["--threads", str(args.threads or 2)]
        if args.cache_dir:
            options += ["--cache-dir", args.cache_dir]
        if args.batch_size:
            options += ["--batch-size", str(args.batch_size)]
        if args.builtin_records:
            options += ["--records", str(args.builtin_records), "--passes", "1"]
        if args.no_progress:
            options.append("--no-progress")
        return ray_pass.main(options)
    if args.annotations:
        from sds_loader.cli.bench import annotations

        options = ["--threads", str(args.threads or 1)]
        if args.cache_dir:
            options += ["--cache-dir", args.cache_dir]
        if args.batch_size:
            options += ["--batch-size", str(args.batch_size)]
        if args.batches:
            options += ["--batches", str(args.batches)]
        if args.builtin_records:
            options += ["--captures", str(args.builtin_records)]
        return annotations.main(options)
    if args.plot is not None and not args.profile:
        raise ValueError("--plot draws the stage shares --profile measures; pass --profile too")
    args.batch_size = args.batch_size or 256
    config = BenchConfig(
        path=args.path,
        batch_size=args.batch_size,
        threads=args.threads,
        batches=args.batches,
        out=args.out,
        inputs=args.inputs,
        target=args.target,
        builtin_records=args.builtin_records,
        cache_dir=args.cache_dir,
        cold=args.cold,
        progress=not args.no_progress,
        command=shlex.join(["sds-loader", *argv]),
    )
    if args.mixture:
        from sds_loader.cli.bench import mixture_cost

        print(mixture_cost.main(config))
        return 0
    if args.augment:
        from sds_loader.cli.bench import augment_cost

        problem = augment_cost.unavailable()
        if problem is not None:
            print(problem, file=sys.stderr)
            return 2
        print(augment_cost.main(config))
        return 0
    if args.loader:
        from sds_loader.cli.bench import loader

        print(loader.main(config))
        return 0
    result = run(config)
    print(report.legend(result.plans, args.batch_size))
    if args.cold:
        print("cold: the shards' pages were dropped from the page cache before every pass")
    print()
    print(report.text(result.rows))
    print()
    wide = report.wide_rows(result.rows)
    if wide:
        print(wide)
        print()
    if args.profile:
        from sds_loader.cli.bench import profile

        print("where each row's time went (shares of its reads' time, summed over threads and workers):")
        print(profile.text(result.rows))
        print()
        if args.plot is not None:
            profile.plot(args.plot, result.rows)
            result.files["profile chart"] = args.plot
    for kind, path in result.files.items():
        print(f"{kind}: {path}")
    if result.chart_problem:
        print(result.chart_problem)
    if result.failed:
        print(f"{len(result.failed)} method(s) failed; see their rows", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    try:
        if args.command == "bench":
            return _bench(args, argv)
        if args.command == "inspect":
            from sds_loader.cli import inspect

            return inspect.run(args.path, as_json=args.json)
        if args.command == "verify":
            from sds_loader.cli import verify

            return verify.run(args.path, as_json=args.json, progress=not args.no_progress)
        if args.command == "synth":
            from sds_loader.cli import synth

            return synth.run(
                args.path,
                records=args.records,
                length=args.length,
                variable_length=args.variable_length,
                writer_options=args.writer_options,
                seed=args.seed,
                show_progress=not args.no_progress,
                bursts=args.bursts,
            )
    except (
        NativeUnavailable,
        FileNotFoundError,
        FileExistsError,
        NotADirectoryError,
        ValueError,
        sds.SignalDatasetError,
    ) as exc:
        print(f"sds-loader {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # Output piped into `head` and the like: stop quietly, as other tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    raise AssertionError(f"unhandled command {args.command!r}")


if __name__ == "__main__":
    raise SystemExit(main())
