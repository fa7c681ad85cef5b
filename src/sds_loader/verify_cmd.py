"""`sds-loader verify PATH`: check every byte a training run would trust.

Reading verifies as it goes, but only the records a run happens to read, and
a corrupt record then stops a training job hours in. `verify` walks every data
shard natively instead: every chunk's hashes (HighwayHash, as Riegeli writes
them) and every record's SafeTensors header, and names each corrupt shard,
chunk and record (with its dataset ordinal, the number a user can act on).
Exit status 1 when anything is corrupt, 0 when all is clean, so it can gate a
pipeline.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

import signal_dataset as sds
from tqdm import tqdm

from sds_loader import native_tools
from sds_loader.dataset_shards import ShardFile, shard_files
from sds_loader.errors import CorruptShardError
from sds_loader.textfmt import size

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
    #: Dataset ordinal of `record`, when one names it.
    ordinal: int | None = None


@dataclass
class ShardResult:
    path: str
    records: int
    file_size: int
    problems: list[Problem] = field(default_factory=list)


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
            "records_checked": sum(shard.records for shard in self.shards),
            "bytes_checked": sum(shard.file_size for shard in self.shards),
            "corrupt_shards": [asdict(shard) for shard in self.corrupt],
        }


def check_shard(shard: ShardFile, verify_shard) -> ShardResult:
    """One shard's problems; an unreadable file is one problem, not an exception."""
    try:
        file_size = os.path.getsize(shard.path)
    except OSError as exc:
        return ShardResult(shard.path, shard.records, 0, [Problem(-1, -1, -1, f"cannot read: {exc}")])
    result = ShardResult(shard.path, shard.records, file_size)
    try:
        found = verify_shard(shard.path)
    except CorruptShardError as exc:
        result.problems.append(Problem(-1, -1, -1, str(exc)))
        return result
    except OSError as exc:
        result.problems.append(Problem(-1, -1, -1, f"cannot read: {exc}"))
        return result
    for item in found:
        record = int(item["record"])
        result.problems.append(
            Problem(
                chunk=int(item["chunk"]),
                record=record,
                offset=int(item["offset"]),
                message=str(item["message"]),
                ordinal=shard.ordinal(record) if record >= 0 else None,
            )
        )
    return result


def verify(path: str, *, progress: bool = True) -> Report:
    """Check every data shard of the dataset at `path`."""
    verify_shard = native_tools.function("verify_shard")
    dataset = sds.open(path)
    shards = shard_files(dataset)
    total = 0
    for shard in shards:
        try:
            total += os.path.getsize(shard.path)
        except OSError:
            pass
    results = []
    with tqdm(
        total=total, unit="B", unit_scale=True, desc="verify", delay=1.0, disable=not progress, file=sys.stderr
    ) as bar:
        for shard in shards:
            result = check_shard(shard, verify_shard)
            results.append(result)
            bar.update(result.file_size)
    return Report(dataset.root, results)


def render(report: Report) -> str:
    checked = (
        f"{len(report.shards)} data shard(s), "
        f"{sum(s.records for s in report.shards):,} records, "
        f"{size(sum(s.file_size for s in report.shards))}"
    )
    corrupt = report.corrupt
    if not corrupt:
        return f"clean: {checked}; every chunk hash and record header checks out"
    lines = [f"CORRUPT: {len(corrupt)} of {checked}"]
    root = report.root.removeprefix("file://")
    for shard in corrupt:
        lines.append(f"shard {os.path.relpath(shard.path, root)}: {len(shard.problems)} problem(s)")
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
        ordinal = f", ordinal {problem.ordinal}" if problem.ordinal is not None else ""
        where.append(f"record {problem.record}{ordinal}")
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
