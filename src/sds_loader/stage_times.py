"""The stages a read's time is accounted to, and how a `ReadStats` holds them.

The core times each batch's threads stage by stage (csrc/base/stage_clock.h)
and hands the seconds over once a batch, into one float64 array a reader's
stats keep: a single call, under the GIL, whatever the number of stages. The
last stage, "python", is the time of `read()` as Python measured it, less
the core's own: checking arguments, allocating rows, planning which shard
holds each record, and any record the Python fallback reads. A reader made
with sampling 0 times nothing, Python's part included: a lone "python"
stage would read as the whole of the reads' time.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import numpy as np

#: In the order the core's array holds them (``_native.STAGES``).
STAGES: tuple[str, ...] = ("plan", "wait", "hash", "decompress", "parse", "copy", "augment", "python")

#: What each stage is, in the words the docs and the diagnosis use.
STAGE_MEANINGS: Mapping[str, str] = {
    "plan": "planning the batch (grouping records by shard and chunk, opening shards first touched)",
    "wait": "waiting for bytes (page faults and reads of local files, requests in flight, the node "
    "cache; a verified copy out of a mapping hashes as it copies, and counts here)",
    "hash": "checking hashes",
    "decompress": "decompressing",
    "parse": "parsing chunk, record headers and descriptors",
    "copy": "copying into the batch's rows",
    "augment": "running the augmentation chain on each row as it is decoded",
    "python": "Python around the native read",
}


def zeros() -> np.ndarray:
    """A fresh array of seconds, one per stage."""
    return np.zeros(len(STAGES), dtype=np.float64)


def as_mapping(seconds: np.ndarray) -> dict[str, float]:
    """Stage name -> seconds."""
    return {name: float(value) for name, value in zip(STAGES, seconds.tolist(), strict=True)}


def from_mapping(seconds: Mapping[str, float]) -> np.ndarray:
    """The array form of a mapping of stage name to seconds; unknown names are refused."""
    unknown = set(seconds) - set(STAGES)
    if unknown:
        raise ValueError(f"unknown stages {sorted(unknown)}; the stages are {', '.join(STAGES)}")
    return np.asarray([float(seconds.get(name, 0.0)) for name in STAGES], dtype=np.float64)


#: Overrides the default sampling (one run in how many is timed stage by stage; 0: none).
SAMPLING_ENV = "SDS_LOADER_STAGE_SAMPLING"
#: One run of a batch in this many is timed stage by stage, the others' time
#: shared out as those runs' was: timing every run of short records costs
#: about 2% of their read (docs/performance.md), one in four a quarter of that.
#: The core's own default (ShardSet::kDefaultStageSampling) is the same.
DEFAULT_SAMPLING = 4


def _sampling_from_env() -> int:
    text = os.environ.get(SAMPLING_ENV)
    if text is None or text == "":
        return DEFAULT_SAMPLING
    try:
        every = int(text)
    except ValueError:
        every = -1
    if every < 0:
        raise ValueError(
            f"{SAMPLING_ENV}={text!r}: give how many runs of a batch there are to each one timed "
            "stage by stage (1: every run), or 0 for no stage times"
        )
    return every


_sampling = _sampling_from_env()


def sampling() -> int:
    """One run in how many the readers made from now on in this process time stage by stage."""
    return _sampling


@contextmanager
def sampled_every(every: int) -> Iterator[None]:
    """Readers whose process state is made inside time one run in `every` (0: no stage times)."""
    global _sampling
    if isinstance(every, bool) or not isinstance(every, int) or every < 0:
        raise ValueError(f"every must be a non-negative integer, not {every!r}")
    before, _sampling = _sampling, every
    try:
        yield
    finally:
        _sampling = before
