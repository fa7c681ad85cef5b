"""The local shard files a dataset stores, and which ordinals each one holds.

`inspect` and `verify` work shard by shard but report in ordinals, the only
numbering a dataset's user knows. The reader's shard table (dataset.py:
the manifests read once, linear in the shards, checked against
signal_dataset's `read_instructions` by its tests) is the authority on both;
this module only regroups it by file.
"""

from __future__ import annotations

from dataclasses import dataclass

import signal_dataset as sds

from sds_loader.dataset import shard_table


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
        # Cheap (one ordinal): refuses a reference dataset as the whole range would.
        dataset.read_instructions(0, 1, metadata=metadata)
    except ValueError as exc:
        raise ShardsUnavailable(
            "this dataset names its records by explicit indices into another dataset's "
            f"shards ({exc}); inspect or verify the dataset that stores them instead",
            "reference dataset: its records index another dataset's shards",
        ) from None
    table = shard_table(dataset, metadata=metadata)
    starts = table.starts.tolist()
    skips = table.skips.tolist()
    files = table.files.tolist()
    runs: dict[int, list[Run]] = {}
    for k in range(len(starts) - 1):
        runs.setdefault(files[k], []).append(Run(starts[k], skips[k], starts[k + 1] - starts[k]))
    return [
        ShardFile(_local(table.paths[file]), sum(run.take for run in found), tuple(found))
        for file, found in runs.items()
    ]
