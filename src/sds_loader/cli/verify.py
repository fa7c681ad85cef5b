"""`sds-loader verify PATH`: check every byte a training run would trust.

Reading verifies as it goes, but only the records a run happens to read, and
a corrupt record then stops a training job hours in. `verify` walks every data
shard natively instead: every chunk's hashes (HighwayHash, as Riegeli writes
them) and every record's SafeTensors header, and names each corrupt shard,
chunk and record (with its dataset ordinal, the number a user can act on).
Metadata shards, which hold JSON, are checked too (see verify_metadata).
Exit status 1 when anything is corrupt, 0 when all is clean, so it can gate a
pipeline.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import signal_dataset as sds

from sds_loader.cli import native_tools, verify_metadata
from sds_loader.cli.dataset_shards import ShardFile, shard_files
from sds_loader.cli.progress import progress as progress_bar
from sds_loader.cli.textfmt import size
from sds_loader.dataset import open_dataset
from sds_loader.errors import CorruptShardError

#: Problems printed per shard; the JSON report keeps every one.
SHOWN_PER_SHARD = 20


@dataclass
class Problem:
    chunk: int
    #: Record within the shard, or -1 for a problem with a chunk or the whole file.
    record: int
    #: Byte offset in the shard file, or -1 when the file could not be read at all.
    offset: int
    message: str
    #: Dataset ordinals of the records affected: `record`'s, or every record of
    #: a failed chunk when the shard's layout says which those are.
    ordinals: list[int] = field(default_factory=list)


@dataclass
class ShardResult:
    path: str
    records: int
    file_size: int
    problems: list[Problem] = field(default_factory=list)
    #: "data" or "metadata".
    kind: str = "data"


@dataclass
class Report:
    root: str
    shards: list[ShardResult]

    @property
    def corrupt(self) -> list[ShardResult]:
        return [shard for shard in self.shards if shard.problems]

    def to_json(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "clean": not self.corrupt,
            "shards_checked": len(self.shards),
            "records_checked": sum(shard.records for shard in self.shards if shard.kind == "data"),
            "bytes_checked": sum(shard.file_size for shard in self.shards),
            "corrupt_shards": [asdict(shard) for shard in self.corrupt],
        }


def check_shard(
    shard: ShardFile, verify_shard: Callable[[str], Sequence[Mapping[str, Any]]], kind: str = "data"
) -> ShardResult:
    """One shard's problems; an unreadable file is one problem, not an exception."""
    try:
        file_size = os.path.getsize(shard.path)
    except OSError as exc:
        return ShardResult(shard.path, shard.records, 0, [Problem(-1, -1, -1, f"cannot read: {exc}")], kind)
    result = ShardResult(shard.path, shard.records, file_size, kind=kind)
    try:
        found = verify_shard(shard.path)
    except CorruptShardError as exc:
        result.problems.append(Problem(-1, -1, -1, str(exc)))
        return result
    except OSError as exc:
        result.problems.append(Problem(-1, -1, -1, f"cannot read: {exc}"))
        return result
    layout = _chunk_layout(shard.path) if found and kind == "data" else None
    for item in found:
        problem = Problem(
            chunk=int(item["chunk"]),
            record=int(item["record"]),
            offset=int(item["offset"]),
            message=str(item["message"]),
        )
        if problem.record >= 0:
            records = [problem.record]
        elif problem.chunk >= 0 and layout is not None:
            group, count = layout
            records = list(range(problem.chunk * group, min((problem.chunk + 1) * group, count)))
        else:
            records = []
        problem.ordinals = [o for o in map(shard.ordinal, records) if o is not None]
        result.problems.append(problem)
    return result


def _chunk_layout(path: str) -> tuple[int, int] | None:
    """(records per chunk, records) when every chunk but the last is full, else None.

    ArrayRecord fills each chunk to its group size, so chunk k then holds
    records k*G to k*G+G-1: a failed chunk hash can be reported as the records
    (and ordinals) it loses, which is what a user can act on.
    """
    try:
        summary = native_tools.function("shard_summary")(path)
    except Exception:  # noqa: BLE001 - a shard too damaged to summarise keeps chunk numbers only
        return None
    group, count, chunks = summary["max_records_per_chunk"], summary["num_records"], summary["num_chunks"]
    if group < 1 or chunks != -(-count // group):
        return None
    return group, count


def verify(path: str, *, progress: bool = True) -> Report:
    """Check every data and metadata shard of the dataset at `path`."""
    verify_data = native_tools.function("verify_shard")
    dataset = open_dataset(path)
    work = [(shard, verify_data, "data") for shard in shard_files(dataset)]
    work += [
        (shard, verify_metadata.verify_shard, "metadata") for shard in shard_files(dataset, metadata=True)
    ]
    total = 0
    for shard, _, _ in work:
        try:
            total += os.path.getsize(shard.path)
        except OSError:
            pass
    results = []
    with progress_bar(total, "verify", in_bytes=True, enabled=progress) as bar:
        for shard, check, kind in work:
            result = check_shard(shard, check, kind)
            results.append(result)
            bar.update(result.file_size)
    return Report(dataset.root, results)


def render(report: Report) -> str:
    data = [s for s in report.shards if s.kind == "data"]
    checked = (
        f"{len(data)} data and {len(report.shards) - len(data)} metadata shard(s), "
        f"{sum(s.records for s in data):,} records, "
        f"{size(sum(s.file_size for s in report.shards))}"
    )
    corrupt = report.corrupt
    if not corrupt:
        return f"clean: {checked}; every chunk hash and record header checks out"
    lines = [f"CORRUPT: {len(corrupt)} of {checked}"]
    root = report.root.removeprefix("file://")
    for shard in corrupt:
        lines.append(
            f"{shard.kind} shard {os.path.relpath(shard.path, root)}: {len(shard.problems)} problem(s)"
        )
        for problem in shard.problems[:SHOWN_PER_SHARD]:
            lines.append("  " + _describe(problem))
        if len(shard.problems) > SHOWN_PER_SHARD:
            lines.append(f"  ... and {len(shard.problems) - SHOWN_PER_SHARD} more (--json lists all)")
    return "\n".join(lines)


def _describe(problem: Problem) -> str:
    where = []
    if problem.chunk >= 0:
        where.append(f"chunk {problem.chunk}")
    if problem.record >= 0:
        where.append(f"record {problem.record}")
    if len(problem.ordinals) == 1:
        where.append(f"ordinal {problem.ordinals[0]}")
    elif problem.ordinals:
        where.append(f"ordinals {problem.ordinals[0]}-{problem.ordinals[-1]}")
    if problem.offset >= 0:
        where.append(f"offset {problem.offset}")
    prefix = (", ".join(where) + ": ") if where else "whole file: "
    return prefix + problem.message


def run(path: str, *, as_json: bool = False, progress: bool = True) -> int:
    try:
        report = verify(path, progress=progress)
    except sds.CorruptDatasetError as exc:
        # The control documents themselves are damaged: no shard can be trusted.
        message = f"corrupt dataset: {exc}"
        if as_json:
            json.dump({"root": path, "clean": False, "error": message}, sys.stdout, indent=2)
            sys.stdout.write("\n")
        else:
            print(message)
        return 1
    if as_json:
        json.dump(report.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(render(report))
    return 1 if report.corrupt else 0
