"""A shuffle that reads like a scan: runs of neighbouring records, mixed across the dataset.

A uniformly shuffled epoch asks the disk for every record on its own. Warm in
the page cache that costs little; cold on a disk, on a network volume or in
an object store, every record is a seek or a request, and a chunk that holds
several records (``group_size:G``) is read and decompressed once per record
instead of once. `ShardAwareSampler` keeps most of the mixing and gives the
reader long runs instead, in the spirit of FFCV's quasi-random order and
MosaicML Streaming's block shuffles:

1. Each shard's records are cut into *runs* of `run_length` neighbouring
   records, aligned to multiples of `run_length` inside the shard (so with a
   `run_length` that is a multiple of the shard's group size, no chunk is
   split between runs) and never crossing a shard's end.
2. The runs are shuffled over the whole dataset.
3. The records of each `runs_mixed` consecutive runs of that order are
   shuffled among themselves, so any stretch of the epoch (a batch) draws a
   few records from each of many places rather than all of one run.

A batch of ``run_length * runs_mixed`` records (256 by default) is then about
`runs_mixed` whole runs from as many places in as many shards: the native
reader coalesces each run into one large read, while position in the epoch
says nothing about where a record is stored (the rank correlation between
the two is near zero).

The two knobs trade locality for mixing:

- `run_length` (default 16): records that travel together. Longer runs mean
  fewer, larger reads (what cold disks and object stores reward) but put
  records that were written side by side (often the same capture session)
  in the same batch more often. 16 records of 64 KiB is a 1 MiB read.
- `runs_mixed` (default 16): how many runs share out each stretch of the
  epoch. More runs mean a small batch still samples many places; a batch
  smaller than ``run_length * runs_mixed`` then touches more runs and reads
  fewer records of each. Choose ``run_length * runs_mixed`` near the batch
  size.

A third knob keeps the disk busy while the cores decode:

- `readahead` (default: two stretches, ``2 * run_length * runs_mixed``, or
  four for a dataset in object storage): at
  the start of each stretch of ``run_length * runs_mixed`` records the
  sampler announces the records up to `readahead` past that stretch to the
  dataset (`SDSTorchDataset.will_need`: for local shards
  ``posix_fadvise(WILLNEED)`` on a native thread, so the call returns at
  once), and the kernel reads the next batches' runs while this one
  decodes. Without it a cold epoch waits for the disk and decodes by turns.
  For local shards the page cache is shared, so announcements made in the
  main process serve DataLoader workers too; for object storage they serve
  only the process that fetches them, so a dataset that has gone to workers
  drops them in the main process unless it has a node cache, which every
  worker reads (torch/readahead_route.py). The cost is page cache: `readahead` records held
  ahead (32 MiB of 64 KiB records at the defaults). It gains most where
  decoding is slow, since the disk then has the decode's time to read the
  next runs in (the figures are in docs/benchmarks.md, "ShardAwareSampler
  and readahead"). 0 turns it off. It does not change the order, so a
  state saved under one `readahead` resumes under another. A dataset
  without `will_need` (a URI string, another Dataset class) gets no
  announcements.

The defaults favour mixing over locality: on a disk that serves many small
reads in flight nearly as fast as large ones, longer runs gain little
(``sds-loader bench --loader`` measures it on the machine that trains).

With ``shuffle=False`` the order is the dataset's own: the best locality, no
mixing (an evaluation pass, say).

Where records live comes from signal_dataset's addressing
(``read_instructions``, or a reference dataset's manifests; see
`sds_loader.dataset`) only. A dataset it cannot address (a wrapper with
no ``uri``) is cut into runs of consecutive ordinals instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import signal_dataset as sds

from sds_loader.dataset import shard_table
from sds_loader.samplers.contract import EpochSampler, non_negative_int, positive_int
from sds_loader.samplers.subsets import unwrap
from sds_loader.storage.sources import is_remote

#: Stretches announced ahead by default for local shards: the disk's queue
#: fills with one or two, and more bought nothing on the development disk.
LOCAL_STRETCHES_AHEAD = 2
#: ...and for shards in object storage, where each request waits a round
#: trip of tens of milliseconds before its bytes come: the stretches ahead
#: are requests in flight. Four stretches of 64 KiB records at the
#: defaults are 64 MiB, what the reader's remote readahead cache holds.
REMOTE_STRETCHES_AHEAD = 4


def _stored_runs(dataset: object) -> tuple[int, np.ndarray, np.ndarray]:
    """(records, first ordinal of each stretch stored contiguously, its first record in the shard).

    A stretch is a run of ordinals that its shard stores side by side; the
    last entry of the first array is the record count, closing the last one.
    """
    addressing = getattr(dataset, "shard_table", None)
    if callable(addressing):
        # A reader that has opened the dataset already knows (BatchReader, SDSTorchDataset:
        # see sds_loader.dataset_protocol.ShardAddressed).
        table = addressing()
        if table is not None:
            return int(table.starts[-1]), table.starts, table.skips[:-1]
    uri = getattr(dataset, "uri", dataset)
    if isinstance(uri, str | os.PathLike):
        opened = sds.open(os.fspath(uri))
        try:
            table = shard_table(opened)
        except ValueError:  # signal_dataset no longer resolves a reference dataset as read here
            count = len(opened)
        else:
            return int(table.starts[-1]), table.starts, table.skips[:-1]
    else:
        try:
            count = len(dataset)  # type: ignore[arg-type]
        except TypeError:
            raise TypeError(
                "ShardAwareSampler needs an SDSTorchDataset, a BatchReader, a dataset URI, or a "
                f"sized dataset; got {type(dataset).__name__}"
            ) from None
    return count, np.array([0, count], dtype=np.int64), np.zeros(1, dtype=np.int64)


def cut_runs(starts: np.ndarray, skips: np.ndarray, run_length: int) -> np.ndarray:
    """First ordinal of every run, plus the record count as a closing sentinel.

    A run begins where its shard record is a multiple of `run_length`, and
    wherever a stored stretch begins.
    """
    pieces = []
    for first, stop, skip in zip(starts[:-1].tolist(), starts[1:].tolist(), skips.tolist(), strict=True):
        if stop <= first:
            continue
        aligned = first + (-skip) % run_length
        pieces.append(np.array([first], dtype=np.int64))
        pieces.append(
            np.arange(aligned if aligned > first else aligned + run_length, stop, run_length, dtype=np.int64)
        )
    pieces.append(starts[-1:].astype(np.int64))
    return np.concatenate(pieces)


def subset_runs(ordinals: np.ndarray, starts: np.ndarray, run_length: int) -> tuple[np.ndarray, np.ndarray]:
    """A Subset's runs: (subset positions sorted by ordinal, first sorted position of each run).

    The subset's members are laid out in the order their records are stored,
    and cut into runs of `run_length` neighbours among them, never across
    the end of a stored stretch (a shard): a split keeps the locality that
    is left in it, however sparse.
    """
    positions = np.argsort(ordinals, kind="stable")
    stretch = np.searchsorted(starts, ordinals[positions], side="right")
    boundaries = np.flatnonzero(np.diff(stretch)) + 1 if positions.size else np.zeros(0, dtype=np.int64)
    firsts = np.concatenate([[0], boundaries]).astype(np.int64) if positions.size else np.zeros(0, np.int64)
    stops = np.concatenate([firsts[1:], [positions.size]]).astype(np.int64)
    runs = [
        np.arange(first, stop, run_length, dtype=np.int64) for first, stop in zip(firsts, stops, strict=True)
    ]
    runs.append(np.asarray([positions.size], dtype=np.int64))
    return positions.astype(np.int64), np.concatenate(runs)


def _announce_ordinals(announce: Any, ordinals: np.ndarray) -> Any:
    def announce_positions(positions: list[int]) -> object:
        return announce(ordinals[np.asarray(positions, dtype=np.int64)])

    return announce_positions


class ShardAwareSampler(EpochSampler[int]):
    """Shuffled ordinals in runs of neighbouring records: mixed epochs, large reads.

    ``DataLoader(dataset, batch_size=256, sampler=ShardAwareSampler(dataset),
    collate_fn=collate)``. See this module's docstring for the order and its
    two knobs, and `sds_loader.samplers.contract` for determinism,
    `num_replicas`/`rank` partitions (a rank takes whole stretches of
    ``run_length * runs_mixed`` records in turn with the others), `set_epoch`
    and `state_dict()`/`load_state_dict()` resume, exact on the same world
    size and on another one every record once.
    """

    def __init__(
        self,
        dataset: object,
        *,
        shuffle: bool = True,
        seed: int = 0,
        num_replicas: int | None = None,
        rank: int | None = None,
        drop_last: bool = False,
        run_length: int = 16,
        runs_mixed: int = 16,
        readahead: int | None = None,
    ) -> None:
        super().__init__(
            shuffle=shuffle, seed=seed, num_replicas=num_replicas, rank=rank, drop_last=drop_last
        )
        self.run_length = positive_int("run_length", run_length)
        self.runs_mixed = positive_int("runs_mixed", runs_mixed)
        base, ordinals = unwrap(dataset)
        if readahead is None:
            uri = getattr(base, "uri", None)
            remote = isinstance(uri, str) and is_remote(uri)
            stretches = REMOTE_STRETCHES_AHEAD if remote else LOCAL_STRETCHES_AHEAD
            readahead = stretches * self.run_length * self.runs_mixed
        self.readahead = non_negative_int("readahead", readahead)
        announce = getattr(base, "will_need", None)
        #: The dataset's `will_need`, to which upcoming records are announced, or None.
        self._announce = announce if callable(announce) else None
        count, starts, skips = _stored_runs(base)
        #: For a Subset: subset positions in the order of their ordinals, which
        #: the order below is computed over; None for a whole dataset.
        self._positions: np.ndarray | None = None
        self._count = count
        #: First ordinal of each run; the last entry is the record count.
        self._runs = cut_runs(starts, skips, self.run_length)
        if ordinals is not None:
            self._positions, self._runs = subset_runs(ordinals, starts, self.run_length)
            self._count = int(ordinals.size)
            if self._announce is not None:
                self._announce = _announce_ordinals(self._announce, ordinals)

    @property
    def runs(self) -> int:
        """Runs the dataset is cut into."""
        return len(self._runs) - 1

    def _item_count(self) -> int:
        return self._count

    def _deal_block(self) -> int:
        # A rank takes whole stretches of runs_mixed runs: its batches draw
        # from as few places as on one rank, whatever the world size.
        return self.run_length * self.runs_mixed

    def _layout(self) -> dict[str, Any]:
        return {
            **super()._layout(),
            "run_length": self.run_length,
            "runs_mixed": self.runs_mixed,
            "runs": self.runs,
        }

    def _epoch_items(self, rng: np.random.Generator | None) -> np.ndarray:
        order = self._stored_order(rng)
        return order if self._positions is None else self._positions[order]

    def _stored_order(self, rng: np.random.Generator | None) -> np.ndarray:
        count = self._count
        if rng is None:
            return np.arange(count, dtype=np.int64)
        firsts = self._runs[:-1]
        lengths = np.diff(self._runs)
        shuffled = rng.permutation(len(firsts))
        firsts, lengths = firsts[shuffled], lengths[shuffled]
        # Lay the shuffled runs end to end: position p of run k holds firsts[k] + (p - its start).
        run_start_positions = np.cumsum(lengths) - lengths
        order = np.repeat(firsts - run_start_positions, lengths) + np.arange(count, dtype=np.int64)
        window = self.run_length * self.runs_mixed
        whole = count - count % window
        if window > 1 and whole:
            order[:whole] = rng.permuted(order[:whole].reshape(-1, window), axis=1).reshape(-1)
        order[whole:] = rng.permutation(order[whole:])
        return order

    def _count_out(self, items: list[int], start: int) -> Iterator[int]:
        announce = self._announce
        if announce is None or self.readahead == 0:
            yield from super()._count_out(items, start)
            return
        # At the start of each stretch of run_length * runs_mixed records
        # (about one batch), announce the records up to `readahead` past it:
        # their reads are under way while this stretch is read and decoded.
        stretch = self.run_length * self.runs_mixed
        announced = start
        for position in range(start, len(items)):
            if (position - start) % stretch == 0:
                until = min(len(items), position + stretch + self.readahead)
                if until > announced:
                    announce(items[announced:until])
                    announced = until
            self._yielded += 1
            yield items[position]

    def __repr__(self) -> str:
        return (
            f"{super().__repr__()[:-1]}, run_length={self.run_length}, runs_mixed={self.runs_mixed}, "
            f"readahead={self.readahead})"
        )
