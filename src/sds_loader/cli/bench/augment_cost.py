"""What augmentation costs: the chain inside the read against the same chain by hand after it.

``sds-loader bench --augment`` reads the same shuffled batches of 256 several
ways and gives each as a share of the plain read's records/s:

- `BatchReader.read` alone (the plain read, 1.00);
- the read with the chain phase + frequency shift + time shift + AWGN given
  to the reader (``augment=``), applied natively in the read's threads;
- the read, then the same chain record by record in numpy, as a
  ``__getitem__`` or a per-sample transform list runs it;
- the read, then the same chain in torch ops over the whole batch;

at 1 thread and at 2 (the reader's threads; torch's too), on records of
1,024 complex64 samples (8 KiB, zstd) and on the built-in 2 x 4,096
complex64 captures (64 KiB, zstd); and, at 1 thread, each transform alone
inside the read, resampling by 4/5 among them, against the read then
`scipy.signal.resample_poly` record by record. Each row also says the
microseconds a record it spends beyond the plain read: what a transform
costs. The hand-written chains are `augment_hand`'s.

Every repeat opens each row's reader afresh and reads one untimed batch
with it, so that no row is timed on state another has not got; then the
rows take turns, a few epochs each, so that load from other work falls on
every row alike. A row keeps its last batch while it makes the next, as a
training loop does. Each ratio is taken within a repeat, and the table
gives medians over repeats with the spread of the rates: on a busy machine
the spread says which figures to trust.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import signal_dataset as sds

from sds_loader import BatchReader, augment
from sds_loader.cli.bench import augment_hand, builtin
from sds_loader.cli.bench import plan as planning

REPEATS = 3
#: The sample rate the chain's frequency shift is stated against (the built-in captures state none).
SAMPLE_RATE = 1e6
#: Resampling by 4/5: a small ratio, which is scipy's polyphase filter at its cheapest.
RESAMPLE = (4, 5)
#: A repeat's rows take turns this many times, each turn whole epochs for at least ROUND_SECONDS.
ROUNDS = 3
ROUND_SECONDS = 0.1
#: The 8 KiB records: this many complex64 samples each, written once beside the built-in datasets.
FRAME_SAMPLES = 1024
FRAME_VERSION = 1
FRAMES_PER_SHARD = 512

#: A row's read of one batch (what it returns is held until its next read).
Step = Callable[[np.ndarray], Any]


@dataclass(frozen=True)
class Records:
    """One kind of record the rows read: its dataset and how the table names it."""

    name: str
    root: str
    description: str


@dataclass
class AugmentRow:
    records: str
    threads: int
    key: str
    label: str
    #: Records/s, one per repeat.
    rates: list[float] = field(default_factory=list)
    #: This row's rate over the plain read's of the same records and threads, one per repeat.
    ratios: list[float] = field(default_factory=list)
    #: Microseconds a record this row spends beyond the plain read's, one per repeat.
    added: list[float] = field(default_factory=list)
    note: str = ""

    @property
    def rate(self) -> float | None:
        return statistics.median(self.rates) if self.rates else None

    @property
    def ratio(self) -> float | None:
        return statistics.median(self.ratios) if self.ratios else None

    @property
    def added_us(self) -> float | None:
        return statistics.median(self.added) if self.added else None

    @property
    def spread(self) -> float | None:
        """The fastest repeat's rate over the slowest's (1.0: every repeat alike)."""
        return max(self.rates) / min(self.rates) if len(self.rates) > 1 else None


@dataclass
class Comparison:
    """One row's rate over another's, repeat by repeat: the figures the issue sets targets for."""

    label: str
    values: list[float] = field(default_factory=list)

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None


# -- the datasets ------------------------------------------------------------


def frame(ordinal: int) -> sds.Record:
    """An 8 KiB record: 1,024 complex64 samples of seeded noise along a time axis at SAMPLE_RATE."""
    rng = np.random.default_rng(ordinal)
    data = rng.standard_normal(2 * FRAME_SAMPLES, dtype=np.float32).view(np.complex64)
    time_axis = sds.Axis(
        "time", FRAME_SAMPLES, coordinate=sds.Coordinate(start=0.0, step=1 / SAMPLE_RATE, unit="s")
    )
    return sds.Record(
        id=f"frame-{ordinal:06d}",
        fields={"samples": sds.Field(data, axes=(time_axis,))},
        metadata={"label": ordinal % builtin.CLASSES},
    )


def ensure_frames(count: int, cache: str | None = None) -> str:
    """`count` 8 KiB records as signal_dataset's default (zstd) shards, written once under the cache."""
    name = f"augment-v{FRAME_VERSION}-{count}x{FRAME_SAMPLES}-complex64-zstd"
    return builtin.write_once(
        os.path.join(builtin.cache_dir(cache), name),
        count,
        frame,
        per_shard=FRAMES_PER_SHARD,
        dataset_id="sds-loader-augment-frames",
    )


def datasets(records: int | None, cache: str | None, say: Callable[[str], None]) -> list[Records]:
    count = builtin.record_count(records)
    frames = ensure_frames(count, cache)
    captures = builtin.ensure(records, progress=False, directory=cache, say=say, variants=("zstd",))["zstd"]
    return [
        Records("8 KiB", frames, f"{count} records of {FRAME_SAMPLES} complex64 (8 KiB), zstd"),
        Records(
            "64 KiB",
            captures,
            f"{count} records of {builtin.CHANNELS}x{builtin.SAMPLES} complex64 (64 KiB), zstd",
        ),
    ]


# -- the rows ----------------------------------------------------------------


#: The transforms timed alone inside the read (at one thread), by the names the batch keys use.
ALONE = (
    "phase",
    "frequency_shift",
    "time_shift",
    "gain",
    "noise",
    "invert",
    "reverse",
    "iq_imbalance",
    "resample",
)


def reader_transforms(name: str = "chain") -> list[augment.Transform]:
    """The hand-written chain's four transforms (``"chain"``), or one of ALONE with the bench's ranges."""
    low, high = augment_hand.SHIFT_FRACTION
    factor = RESAMPLE[0] / RESAMPLE[1]
    made: dict[str, Callable[[], augment.Transform]] = {
        "phase": lambda: augment.Phase(radians=augment_hand.PHASE_RADIANS),
        "frequency_shift": lambda: augment.FrequencyShift(hz=(low * SAMPLE_RATE, high * SAMPLE_RATE)),
        "time_shift": lambda: augment.TimeShift(samples=augment_hand.SHIFT_SAMPLES),
        "gain": lambda: augment.Gain(db=(-6.0, 6.0)),
        "noise": lambda: augment.Noise(snr_db=augment_hand.SNR_DB),
        "invert": lambda: augment.SpectralInversion(),
        "reverse": lambda: augment.TimeReversal(),
        "iq_imbalance": lambda: augment.IQImbalance(amplitude_db=(-1.0, 1.0), phase_degrees=(-5.0, 5.0)),
        "resample": lambda: augment.Resample(factor=(factor, factor)),
    }
    if name == "chain":
        return [made[step]() for step in ("phase", "frequency_shift", "time_shift", "noise")]
    return [made[name]()]


def reader_chain(name: str = "chain", *, seed: int = 0) -> augment.Chain:
    """The chain the reader applies (see `reader_transforms`), its frequency shift in Hz at SAMPLE_RATE."""
    return augment.Chain(reader_transforms(name), fields=("samples",), seed=seed, sample_rate=SAMPLE_RATE)


def _reader(root: str, threads: int, **options: Any) -> BatchReader:
    return BatchReader(root, fields=("samples",), threads=threads, **options)


def plain(root: str, threads: int, repeat: int) -> Step:
    reader = _reader(root, threads)
    return lambda ordinals: reader.read(ordinals)


def in_reader(name: str = "chain") -> Callable[[str, int, int], Step]:
    """How to open a reader that applies `reader_chain(name)`, reading each repeat as an epoch of its own."""

    def open_row(root: str, threads: int, repeat: int) -> Step:
        reader = _reader(root, threads, augment=reader_chain(name))
        return lambda ordinals: reader.read(ordinals, epoch=repeat)

    return open_row


def numpy_records(root: str, threads: int, repeat: int) -> Step:
    reader = _reader(root, threads)
    rng = np.random.default_rng(repeat)

    def step(ordinals: np.ndarray) -> Any:
        samples = reader.read(ordinals)["samples"]
        return augment_hand.chain_records(samples, augment_hand.Draws.draw(rng, len(ordinals)), rng)

    return step


def torch_batch(root: str, threads: int, repeat: int) -> Step:
    import torch

    reader = _reader(root, threads)
    rng = np.random.default_rng(repeat)
    generator = torch.Generator().manual_seed(repeat)

    def step(ordinals: np.ndarray) -> Any:
        samples = torch.from_numpy(reader.read(ordinals)["samples"])
        return augment_hand.chain_batch(samples, augment_hand.Draws.draw(rng, len(ordinals)), generator)

    return step


def scipy_resample(root: str, threads: int, repeat: int) -> Step:
    reader = _reader(root, threads)
    return lambda ordinals: augment_hand.resample_records(reader.read(ordinals)["samples"], *RESAMPLE)


_ALONE_LABELS = {"resample": f"resample by {RESAMPLE[0]}/{RESAMPLE[1]}"}
#: (key, label, how to open it, at one thread only): the rows of one kind of record, in table order.
ROWS: list[tuple[str, str, Callable[[str, int, int], Step], bool]] = [
    ("plain", "BatchReader.read", plain, False),
    ("reader", "the chain inside the read (augment=)", in_reader(), False),
    ("torch", "the read, then the chain in torch ops over the batch", torch_batch, False),
    ("numpy", "the read, then the chain record by record in numpy", numpy_records, False),
    (
        "scipy_resample",
        f"the read, then resample_poly(x, {RESAMPLE[0]}, {RESAMPLE[1]}) record by record",
        scipy_resample,
        True,
    ),
] + [
    (f"alone_{name}", f"{_ALONE_LABELS.get(name, name)} alone inside the read", in_reader(name), True)
    for name in ALONE
]


def _pass(
    opens: dict[str, Callable[[], Step]], batches: Sequence[np.ndarray], first: int
) -> dict[str, float]:
    """Records/s of each row over `batches`, each row opened afresh and warmed by one untimed batch.

    The rows then take turns, ROUNDS times, each reading whole epochs of the
    batches until ROUND_SECONDS have passed (the order turning by one row a
    round, starting at `first`): each row's time is spread over the whole
    pass, so load from other work falls on every row alike, while a row's
    leftovers (torch's worker threads spinning after an op) reach only the
    start of the next row's turn, not every batch of it.
    """
    keys = list(opens)
    per_epoch = sum(len(batch) for batch in batches)
    steps = {key: opens[key]() for key in keys}
    held = {key: step(batches[0]) for key, step in steps.items()}
    records = dict.fromkeys(keys, 0)
    spent = dict.fromkeys(keys, 0.0)
    for turn in range(ROUNDS):
        at = (first + turn) % len(keys)
        for key in keys[at:] + keys[:at]:
            step, done, started = steps[key], 0, time.perf_counter()
            while not done or time.perf_counter() - started < ROUND_SECONDS:
                for batch in batches:
                    held[key] = step(batch)
                done += per_epoch
            spent[key] += time.perf_counter() - started
            records[key] += done
    held.clear()
    return {key: records[key] / spent[key] for key in keys}


def _torch_threads(threads: int | None) -> int | None:
    """Set torch's intra-op threads (None: leave them); return what they were, or None without torch."""
    try:
        import torch
    except ImportError:
        return None
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    return before


def rows(
    kinds: Sequence[Records],
    batch_size: int,
    *,
    batches: int | None = None,
    threads: Sequence[int] = (1, 2),
    repeats: int = REPEATS,
    say: Callable[[str], None] = lambda line: None,
) -> tuple[list[AugmentRow], list[Comparison]]:
    """Time every row on every kind of record at every thread count; return the rows and the
    comparisons the targets are stated in."""
    table: list[AugmentRow] = []
    comparisons: list[Comparison] = []
    before = _torch_threads(None)
    try:
        for kind in kinds:
            length = len(sds.open(kind.root))
            # One epoch, unless --batches says fewer: no pass reads a record twice.
            order = planning.shuffled_batches(length, batch_size, batches or max(1, length // batch_size))
            by_threads: dict[int, dict[str, AugmentRow]] = {}
            for count_threads in threads:
                say(f"timing {kind.name} records at {count_threads} thread(s)")
                _torch_threads(count_threads)
                mine = {
                    key: AugmentRow(kind.name, count_threads, key, label)
                    for key, label, _, single in ROWS
                    if not single or count_threads == threads[0]
                }
                opens = {key: open_row for key, _, open_row, _ in ROWS if key in mine}
                for repeat in range(repeats):
                    rate = _pass(
                        {
                            key: functools.partial(opens[key], kind.root, count_threads, repeat)
                            for key in mine
                        },
                        order,
                        first=repeat,
                    )
                    for key, row in mine.items():
                        row.rates.append(rate[key])
                        row.ratios.append(rate[key] / rate["plain"])
                        row.added.append(1e6 / rate[key] - 1e6 / rate["plain"])
                by_threads[count_threads] = mine
                table += mine.values()
            comparisons += _compare(kind, by_threads, threads)
    finally:
        if before is not None:
            _torch_threads(before)
    return table, comparisons


def _compare(
    kind: Records, by_threads: dict[int, dict[str, AugmentRow]], threads: Sequence[int]
) -> list[Comparison]:
    """The ratios the targets speak of, repeat by repeat, for one kind of record."""

    def over(label: str, top: AugmentRow, bottom: AugmentRow) -> Comparison:
        return Comparison(label, [a / b for a, b in zip(top.rates, bottom.rates, strict=True)])

    found = []
    for count in threads:
        mine = by_threads[count]
        at = f"{kind.name}, {count} thread{'s' * (count != 1)}"
        found.append(
            over(f"{at}: the chain inside the read over torch over the batch", mine["reader"], mine["torch"])
        )
        found.append(
            over(
                f"{at}: the chain inside the read over numpy record by record", mine["reader"], mine["numpy"]
            )
        )
    one = by_threads[threads[0]]
    found.append(
        over(
            f"{kind.name}, 1 thread: resample inside the read over resample_poly",
            one["alone_resample"],
            one["scipy_resample"],
        )
    )
    for more in threads[1:]:
        many = by_threads[more]
        found.append(
            over(f"{kind.name}: the plain read at {more} threads over 1", many["plain"], one["plain"])
        )
        found.append(
            over(
                f"{kind.name}: the chain inside the read at {more} threads over 1",
                many["reader"],
                one["reader"],
            )
        )
    return found


# -- the report ----------------------------------------------------------------


def table(found: Sequence[AugmentRow]) -> str:
    lines = [
        "| records | threads | row | records/s | of the plain read | µs a record over it | spread "
        "| repeats (records/s) |",
        "|---|---:|---|---:|---:|---:|---:|---|",
    ]
    for row in found:
        spread = "-" if row.spread is None else f"{row.spread:.2f}"
        each = ", ".join(f"{value:,.0f}" for value in row.rates)
        rate, ratio, added = f"{row.rate:,.0f}", f"{row.ratio:.2f}", f"{row.added_us:.1f}"
        cells = [row.records, str(row.threads), row.label, rate, ratio, added, spread, each]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def comparison_table(found: Sequence[Comparison]) -> str:
    lines = ["| comparison | median | repeats |", "|---|---:|---|"]
    for one in found:
        each = ", ".join(f"{value:.2f}" for value in one.values)
        lines.append(f"| {one.label} | {one.median:.2f}x | {each} |")
    return "\n".join(lines)


def unavailable() -> str | None:
    """Why the rows cannot run here (torch or scipy not installed), or None."""
    missing = [name for name in ("torch", "scipy") if importlib.util.find_spec(name) is None]
    if not missing:
        return None
    return (
        "bench --augment times the chain by hand in torch and resampling in scipy, and "
        f"{' and '.join(missing)} is not installed: pip install 'sds-loader[torch,bench]'"
    )


def main(config: Any) -> str:
    """Run the rows for `config` (a BenchConfig); write augment.md to its --out; return the tables."""
    from sds_loader.cli.bench.run import results_file, stderr_lines, write_results

    if config.path is not None:
        raise ValueError("--augment times the chain on its own built-in datasets; leave out PATH")
    problem = unavailable()
    if problem is not None:
        raise ModuleNotFoundError(problem)
    written = results_file(config.out, "augment.md")
    say = stderr_lines(config.progress)
    kinds = datasets(config.builtin_records, config.cache_dir, say)
    builtin.warm([kind.root for kind in kinds])
    threads = (1, config.threads or 2)
    found, comparisons = rows(
        kinds, config.batch_size, batches=config.batches, threads=threads, repeats=REPEATS, say=say
    )
    text = (
        f"`{config.command}`: shuffled batches of {config.batch_size}, warm page cache; "
        + "; ".join(f"{kind.name}: {kind.description}" for kind in kinds)
        + f". Medians of {REPEATS} repeats, each row by a fresh reader, the rows taking turns; "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end.\n\n"
        f"{table(found)}\n\n{comparison_table(comparisons)}\n"
    )
    return write_results(written, text)
