"""What mixing costs: a 70/30 `Mixture` of the built-in datasets against each read alone.

``sds-loader bench --mixture`` mixes the built-in dataset's two variants
(zstd shards 70%, uncompressed shards 30%) and reads one epoch of
`MixtureSampler` batches through ``Mixture.__getitems__`` + `collate` in the
main process. Against it, each member reads *the same records in the same
order*, re-batched into whole batches of its own, through its own
``SDSTorchDataset.__getitems__``: the only difference left is the mixing
(two smaller native reads per batch instead of one larger one, and the
mixture's bookkeeping).

The members decode at very different rates (zstd several times slower), so
the fair expectation is not the plain mean of their rates but the rate of
spending each member's share of the records at its own pace: the
time-weighted (harmonic) mean ``1 / sum(share_k / rate_k)``, with the shares
the epoch actually drew. The mixture's rate is reported as a percentage of
that. One more reader takes the same batches with their rows shuffled, so
that each member's rows are scattered through the batch: what reading into
scratch and moving the rows into place costs (see `sds_loader.torch.mixture`).

Every reader reads from a page cache warmed beforehand, after one untimed
pass (opening shards, starting threads, filling buffer pools). In each timed
pass the readers take turns batch by batch, so that each reader's time is
spread over the whole pass and load from other work falls on all of them
alike; the percentages are medians of the per-pass ratios.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sds_loader.cli.bench import builtin

#: The members and their weights: the built-in variants, as builtin.VARIANTS names them.
WEIGHTS: dict[str, float] = {"zstd": 0.7, "uncompressed": 0.3}
REPEATS = 3


@dataclass
class MixtureRow:
    key: str
    label: str
    #: One value per repeat; the row shows their median.
    values: list[float] = field(default_factory=list)
    unit: str = "rec/s"
    note: str = ""

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None


#: One reader's read of one batch, and the batches it reads in a pass.
Reader = tuple[Callable[[Sequence[int]], Any], Sequence[Sequence[int]]]


def _pass(readers: dict[str, Reader]) -> dict[str, float]:
    """Records/s of each reader over its batches, the readers' batches taken in turns.

    Batch by batch, whichever reader is furthest behind (by the share of its
    pass done) reads next, so each reader's pass is spread over the whole
    time the pass takes, and load from other work falls on every reader
    alike. Each reader holds its last batch while it reads the next, as a
    training loop does.
    """
    schedule = sorted(
        ((position + 0.5) / len(batches), key, position)
        for key, (_, batches) in readers.items()
        for position in range(len(batches))
    )
    spent = dict.fromkeys(readers, 0.0)
    held: dict[str, Any] = {}
    for _, key, position in schedule:
        read, batches = readers[key]
        started = time.perf_counter()
        held[key] = read(batches[position])
        spent[key] += time.perf_counter() - started
    held.clear()
    return {key: sum(len(batch) for batch in readers[key][1]) / spent[key] for key in readers}


def rows(
    roots: dict[str, str],
    batch_size: int,
    *,
    batches: int | None = None,
    repeats: int = REPEATS,
    seed: int = 0,
) -> list[MixtureRow]:
    """Time the mixture and each member alone over the same records; return the rows."""
    from sds_loader.torch import Mixture, MixtureSampler, SDSTorchDataset, collate

    names = list(WEIGHTS)
    members = [SDSTorchDataset(roots[name]) for name in names]
    mixed = Mixture(members, [WEIGHTS[name] for name in names], seed=seed)
    epoch = list(MixtureSampler(mixed, batch_size))
    if batches is not None:
        epoch = epoch[:batches]
    records = np.concatenate([np.asarray(batch, dtype=np.int64) for batch in epoch])
    member_of, local = mixed.locate(records)
    drawn = [local[member_of == k] for k in range(len(names))]
    shares = [part.size / records.size for part in drawn]
    alone = [
        [part[first : first + batch_size].tolist() for first in range(0, part.size, batch_size)]
        for part in drawn
    ]
    builtin.warm([roots[name] for name in names])

    def member_alone(k: int) -> Callable[[Sequence[int]], Any]:
        return lambda batch: collate(members[k].__getitems__(batch))

    def mixture_read(batch: Sequence[int]) -> Any:
        return collate(mixed.__getitems__(batch))

    readers: dict[str, Reader] = {name: (member_alone(k), alone[k]) for k, name in enumerate(names)}
    readers["mixture"] = (mixture_read, epoch)
    # The same batches with their rows shuffled: each member's part is read into scratch and moved.
    shuffle = np.random.default_rng(seed)
    readers["interleaved"] = (mixture_read, [shuffle.permutation(batch).tolist() for batch in epoch])
    labels = {
        **{
            name: f"{name} alone, the mixture's {part.size} records of it"
            for name, part in zip(names, drawn, strict=True)
        },
        "mixture": "mixture "
        + "/".join(f"{round(100 * WEIGHTS[n])}" for n in names)
        + f", {records.size} records",
        "interleaved": "the same, each batch's rows shuffled",
    }
    table = {key: MixtureRow(key, label) for key, label in labels.items()}
    expected = MixtureRow("expected", "time-weighted mean of the members alone")
    share = MixtureRow(
        "share",
        "mixture, as % of the time-weighted mean",
        unit="%",
        note="shares drawn: " + ", ".join(f"{n} {100 * s:.1f}%" for n, s in zip(names, shares, strict=True)),
    )
    table["interleaved"].note = "members' rows scattered: read into scratch, then moved into place"
    interleaved_share = MixtureRow(
        "interleaved_share", "shuffled rows, as % of the time-weighted mean", unit="%"
    )
    _pass(readers)  # opens every shard, starts the threads, fills the buffer pools
    for _ in range(repeats):
        rate = _pass(readers)
        for key, row in table.items():
            row.values.append(rate[key])
        weighted = 1.0 / sum(s / rate[name] for name, s in zip(names, shares, strict=True))
        expected.values.append(weighted)
        share.values.append(100 * rate["mixture"] / weighted)
        interleaved_share.values.append(100 * rate["interleaved"] / weighted)
    return [*table.values(), expected, share, interleaved_share]


def main(config: Any) -> str:
    """Run the mixture rows for `config` (a BenchConfig); write mixture.md to its --out; return the table."""
    from sds_loader.cli.bench.run import results_file, stderr_lines, write_results

    if config.path is not None:
        raise ValueError("--mixture mixes the built-in datasets; leave out PATH")
    written = results_file(config.out, "mixture.md")
    say = stderr_lines(config.progress)
    # Only the members: the other built-in variants are not read here, so not written either.
    roots = builtin.ensure(
        config.builtin_records,
        progress=config.progress,
        directory=config.cache_dir,
        say=say,
        variants=tuple(WEIGHTS),
    )
    say("timing the mixture and each member alone")
    found = rows(roots, config.batch_size, batches=config.batches, repeats=REPEATS)
    text = (
        f"`{config.command}`: batches of {config.batch_size}, `Mixture.__getitems__` + `collate` in the main "
        f"process against each member's `SDSTorchDataset.__getitems__` + `collate` over the same records; "
        f"medians of {REPEATS} repeats, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the "
        f"end.\n\n{table(found)}\n"
    )
    return write_results(written, text)


def table(found: Sequence[MixtureRow]) -> str:
    lines = ["| row | median | repeats | note |", "|---|---:|---|---|"]
    for row in found:
        median = row.median
        shown = "-" if median is None else f"{median:,.0f}" if row.unit == "rec/s" else f"{median:.1f}"
        each = ", ".join(f"{v:,.0f}" if row.unit == "rec/s" else f"{v:.1f}" for v in row.values)
        lines.append(f"| {row.label} | {shown} {row.unit} | {each} | {row.note} |")
    return "\n".join(lines)
