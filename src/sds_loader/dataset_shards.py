"""The local shard files a dataset stores, and which ordinals each one holds.

`inspect` and `verify` work shard by shard but report in ordinals, the only
numbering a dataset's user knows. signal_dataset's `read_instructions` is the
authority on both (control documents are never parsed here); this module only
regroups its answer by file.
"""

from __future__ import annotations

from dataclasses import dataclass

import signal_dataset as sds


class ShardsUnavailable(ValueError):
    """The dataset's shards cannot be listed as local files, with the reason.

    `short` says it in a few words, for a table cell.
    """

    def __init__(self, message: str, short: str) -> None:
        super().__init__(message)
        self.short = short


@dataclass(frozen=True)
class Run:
    """`take` consecutive ordinals from `first_ordinal`, stored from record `skip`."""

    first_ordinal: int
    skip: int
    take: int


@dataclass(frozen=True)
class ShardFile:
    path: str
    #: Records the shard file holds, whether or not the dataset names all of them.
    records: int
    runs: tuple[Run, ...]

    def ordinal(self, record: int) -> int | None:
        """The dataset ordinal of the shard's `record`, or None if no ordinal names it."""
        for run in self.runs:
            if run.skip <= record < run.skip + run.take:
                return run.first_ordinal + record - run.skip
        return None


def _local(uri: str) -> str:
    if uri.startswith("file://"):
        return uri[len("file://") :]
    if "://" in uri:
        raise ShardsUnavailable(
            f"shard {uri} is remote; inspect and verify read local files, so copy the "
            "dataset to a local directory first",
            "remote shards",
        )
    return uri


def shard_files(dataset: sds.Dataset, *, metadata: bool = False) -> list[ShardFile]:
    """Every data (or metadata) shard file of `dataset`, in ordinal order."""
    if len(dataset) == 0:
        return []
    try:
        instructions = dataset.read_instructions(0, len(dataset), metadata=metadata)
    except ValueError as exc:
        raise ShardsUnavailable(
            "this dataset names its records by explicit indices into another dataset's "
            f"shards ({exc}); inspect or verify the dataset that stores them instead",
            "reference dataset: its records index another dataset's shards",
        ) from None
    runs: dict[str, list[Run]] = {}
    sizes: dict[str, int] = {}
    for instruction in instructions:
        path = _local(instruction.filename)
        runs.setdefault(path, []).append(Run(instruction.first_ordinal, instruction.skip, instruction.take))
        sizes[path] = instruction.examples_in_shard
    return [ShardFile(path, sizes[path], tuple(found)) for path, found in runs.items()]
