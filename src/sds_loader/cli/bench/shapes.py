"""Batch shapes: how many an epoch of padded windows takes, and how much of it is padding.

``sds-loader bench --windows`` ends with these rows (or ``python -m
sds_loader.cli.bench.shapes`` alone). A dataset of captures whose lengths
spread 1:10 (205 to 2,048 complex64 samples; written once, cached beside the
built-in dataset) is read for two epochs through `SDSTorchDataset` and a
DataLoader, batched and padded in each of the ways a loader can, and each
row counts what the loader delivered:

- *shapes per epoch*: the distinct ``(batch, ..., length)`` shapes of an
  epoch's padded field (the most of the epochs), which is what a model
  compiled for static shapes compiles, or a CUDA graph captures, once each;
- *both epochs*: the distinct shapes over the two, since compiled graphs
  are kept across epochs;
- *padded*: the share of the delivered positions that are padding, rows
  marked invalid in ``valid`` counted whole.

Nothing here is timed: shapes and padding are counts.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import signal_dataset as sds

from sds_loader import Boundaries, Window
from sds_loader.cli.bench.builtin import cache_dir, write_once

RECORDS = 512
SHORTEST, LONGEST = 205, 2048
BATCH = 32
EPOCHS = 2
BOUNDARIES = Boundaries.powers_of_two(256, 2048)
#: Bump when the captures' content or layout changes.
VERSION = 1


def length(ordinal: int) -> int:
    """Lengths spread 1:10, in no order related to the ordinal."""
    return SHORTEST + (ordinal * 7919) % (LONGEST - SHORTEST + 1)


def capture(ordinal: int) -> sds.Record:
    rng = np.random.default_rng(ordinal)
    data = rng.standard_normal(2 * length(ordinal), dtype=np.float32).view(np.complex64)
    return sds.Record(
        id=f"spread-{ordinal:05d}",
        fields={"samples": sds.Field(data, axes=(sds.Axis("time", data.size),))},
        metadata={"label": ordinal % 4},
    )


def ensure(records: int = RECORDS, cache: str | None = None) -> str:
    """The spread-length dataset's root, written when not yet cached."""
    return write_once(
        os.path.join(cache_dir(cache), f"shapes-v{VERSION}-{records}"),
        records,
        capture,
        per_shard=256,
        dataset_id="sds-loader-shapes",
        writer_options="group_size:1,uncompressed",
    )


@dataclass(frozen=True)
class Shapes:
    """What the batches of some epochs held: their shapes per epoch, and the positions."""

    per_epoch: list[set[tuple[int, ...]]]
    positions: int
    valid: int

    @property
    def most_per_epoch(self) -> int:
        return max(len(shapes) for shapes in self.per_epoch)

    @property
    def overall(self) -> int:
        return len(set().union(*self.per_epoch))

    @property
    def padded(self) -> float:
        return 1.0 - self.valid / self.positions if self.positions else 0.0


def count(epochs: Iterable[Iterable[Mapping[str, Any]]], key: str = "samples") -> Shapes:
    """Shapes and positions of the batches of `epochs`, each a loader's epoch of collated batches."""
    per_epoch: list[set[tuple[int, ...]]] = []
    positions = valid = 0
    for batches in epochs:
        shapes: set[tuple[int, ...]] = set()
        for batch in batches:
            array = batch[key]
            shapes.add(tuple(array.shape))
            # Rows that fill a batch (fill="mask") have a length of 0: all padding.
            lengths = np.asarray(batch[f"{key}_length"])
            positions += int(array.shape[0]) * int(array.shape[-1])
            valid += int(lengths.sum())
        per_epoch.append(shapes)
    return Shapes(per_epoch, positions, valid)


def rows(root: str) -> list[tuple[str, Shapes]]:
    """Each way of batching the dataset, and what two epochs of it delivered."""
    import torch
    from torch.utils.data import BatchSampler, DataLoader, RandomSampler

    from sds_loader.torch import LengthBucketSampler, SDSTorchDataset, collate

    def run(window: Window, sampler: Callable[[SDSTorchDataset], Any]) -> Shapes:
        dataset = SDSTorchDataset(root, inputs=None, fields={"samples": "samples"}, window=window)
        batches = sampler(dataset)
        loader = DataLoader(dataset, batch_sampler=batches, collate_fn=collate)

        def epoch(number: int) -> list[Mapping[str, Any]]:
            if hasattr(batches, "set_epoch"):
                batches.set_epoch(number)
            return list(loader)

        return count(epoch(number) for number in range(EPOCHS))

    longest = Window("time", None, pad=True)
    bounded = Window("time", None, pad=True, boundaries=BOUNDARIES)

    def shuffled(dataset: SDSTorchDataset) -> BatchSampler:
        # Seeded, so that every run counts the same batches.
        return BatchSampler(RandomSampler(dataset, generator=torch.Generator().manual_seed(0)), BATCH, False)

    def buckets(dataset: SDSTorchDataset, **options: Any) -> LengthBucketSampler:
        return LengthBucketSampler(dataset, BATCH, seed=0, **options)

    named = "powers of two 256-2048"
    return [
        (
            "random batches, each padded to the dataset's longest",
            run(Window("time", LONGEST, pad=True), shuffled),
        ),
        ("random batches, each padded to its longest", run(longest, shuffled)),
        ("LengthBucketSampler, each padded to its longest", run(longest, buckets)),
        (
            f"LengthBucketSampler + boundaries ({named})",
            run(bounded, lambda d: buckets(d, boundaries=BOUNDARIES)),
        ),
        (
            "  the same, fill='mask' (padding rows marked invalid)",
            run(bounded, lambda d: buckets(d, boundaries=BOUNDARIES, fill="mask")),
        ),
        (
            "  the same, fill='repeat' (records repeated)",
            run(bounded, lambda d: buckets(d, boundaries=BOUNDARIES, fill="repeat")),
        ),
    ]


def report(records: int = RECORDS, cache: str | None = None) -> list[tuple[str, Shapes]]:
    """Print the batch-shape rows; returns them."""
    try:
        import torch  # noqa: F401 - only whether it imports
    except ImportError:
        print(
            "batch shapes: skipped, they are counted through a DataLoader (pip install 'sds-loader[torch]')"
        )
        return []
    root = ensure(records, cache)
    print(
        f"batch shapes: {records} captures of {SHORTEST:,} to {LONGEST:,} complex64 samples (1:10), "
        f"batches of {BATCH}, {EPOCHS} epochs through a DataLoader",
        flush=True,
    )
    measured = rows(root)
    for label, shapes in measured:
        print(
            f"{label:62} {shapes.most_per_epoch:4} shapes/epoch {shapes.overall:4} both epochs "
            f"{shapes.padded:7.1%} padded",
            flush=True,
        )
    return measured


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=RECORDS)
    parser.add_argument("--cache-dir", default=None, help="where the captures are cached")
    args = parser.parse_args(argv)
    report(args.records, args.cache_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
