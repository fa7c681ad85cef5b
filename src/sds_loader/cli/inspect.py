"""`sds-loader inspect PATH`: what a dataset holds and what reading it will cost.

The dataset-level facts (records, fields, metadata keys) come from
signal_dataset; the shard-level facts (compression, group size, bytes on disk
against decoded bytes) come from the native `shard_summary`, which reads only
each shard's chunk headers and footer. The point of the command is the note at
the end: compression that saves a few percent of disk but makes every read
several times slower is the most common avoidable cost in an SDS dataset, and
the writer option that removes it is one line.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from collections.abc import Mapping
from typing import Any

import numpy as np

from sds_loader.cli import native_tools
from sds_loader.cli.dataset_shards import ShardsUnavailable, shard_files
from sds_loader.cli.textfmt import size, table
from sds_loader.dataset import open_dataset

#: Below this fraction saved, compression is reported as not worth its read cost.
LITTLE_SAVING = 0.20
UNCOMPRESSED_OPTIONS = 'StorageOptions(writer_options="group_size:1,uncompressed")'


def collect(path: str) -> dict[str, Any]:
    """Everything `inspect` reports, as plain JSON-ready values."""
    dataset = open_dataset(path)
    report: dict[str, Any] = {
        "root": dataset.root,
        "dataset_id": dataset.id,
        "snapshot_id": dataset.snapshot_id,
        "records": len(dataset),
        "fields": {},
        "metadata_keys": {},
        "shards": [],
        "shards_unavailable": None,
        "native_unavailable": None,
        "notes": [],
    }
    if len(dataset):
        first = dataset.record_metadata[0]
        report["fields"] = {
            name: {
                "dtype": np.dtype(field.dtype).name,
                "shape": list(field.shape),
                "axes": [axis.name for axis in field.axes],
            }
            for name, field in sorted(first.fields.items())
        }
        report["metadata_keys"] = {key: type(value).__name__ for key, value in sorted(first.metadata.items())}
    try:
        shards = shard_files(dataset)
        report["metadata_shards"] = len(shard_files(dataset, metadata=True))
    except ShardsUnavailable as exc:
        report["shards_unavailable"] = str(exc)
        return report
    summarize = None
    try:
        summarize = native_tools.function("shard_summary")
    except native_tools.NativeUnavailable as exc:
        report["native_unavailable"] = str(exc)
    for shard in shards:
        entry: dict[str, Any] = {
            "path": shard.path,
            "records": shard.records,
            "file_size": os.path.getsize(shard.path),
        }
        if summarize is not None:
            entry.update(summarize(shard.path))
        report["shards"].append(entry)
    report["totals"] = _totals(report["shards"])
    report["notes"] = notes(report["shards"])
    return report


def _totals(shards: list[dict[str, Any]]) -> dict[str, Any]:
    totals: dict[str, Any] = {
        "records": sum(shard["records"] for shard in shards),
        "file_size": sum(shard["file_size"] for shard in shards),
    }
    if shards and all("decoded_bytes" in shard for shard in shards):
        totals["encoded_bytes"] = sum(shard["encoded_bytes"] for shard in shards)
        totals["decoded_bytes"] = sum(shard["decoded_bytes"] for shard in shards)
    return totals


def notes(shards: list[dict[str, Any]]) -> list[str]:
    """Plain-words advice drawn from the shard summaries; empty when there is none."""
    found: list[str] = []
    compressed = [s for s in shards if s.get("compression") not in (None, "none")]
    if compressed:
        encoded = sum(s["encoded_bytes"] for s in compressed)
        decoded = sum(s["decoded_bytes"] for s in compressed)
        saved = 1 - encoded / decoded if decoded else 0.0
        kinds = "/".join(sorted({s["compression"] for s in compressed}))
        if saved < LITTLE_SAVING:
            on_disk = sum(s["file_size"] for s in compressed)
            found.append(
                f"Compression saves little here: {len(compressed)} {kinds} shard(s) hold "
                f"{size(decoded)} of records in {size(encoded)} of chunk data "
                f"({_percent(saved)} smaller) and {size(on_disk)} on disk "
                f"({_percent(1 - on_disk / decoded)} smaller), and every read must "
                "decompress them. Float noise barely compresses (zstd saves about 8% on "
                "it) and a zstd shard reads several times slower than an uncompressed "
                "one: zstd decompresses at roughly 1 GB/s on a core, where an "
                "uncompressed record is a copy at memory speed. To trade that space for read speed, "
                f"write the shards with {UNCOMPRESSED_OPTIONS}."
            )
    grouped = sorted({s["max_records_per_chunk"] for s in shards if s.get("max_records_per_chunk", 1) > 1})
    if grouped:
        group = grouped[-1]
        found.append(
            f"Chunks hold up to {group} records: reading any one record decompresses its "
            f"whole chunk, so a shuffled read does up to {group} times the work. "
            "group_size:1 (signal_dataset's default) keeps one record per chunk."
        )
    transposed = [s for s in shards if s.get("chunk_types", {}).get("t")]
    if transposed:
        found.append(
            f"{len(transposed)} shard(s) use transposed chunks, which the native reader "
            "does not decode; BatchReader serves them through signal_dataset's reader, "
            "at its speed. Rewrite without transpose:true for the native path."
        )
    return found


def render(report: Mapping[str, Any]) -> str:
    lines = [
        f"dataset   {report['root']}  (id {report['dataset_id']}, snapshot {report['snapshot_id']})",
        f"records   {report['records']:,}",
    ]
    if report["shards_unavailable"]:
        lines.append(f"shards    not listed: {report['shards_unavailable']}")
    else:
        lines.append(f"shards    {len(report['shards'])} data, {report.get('metadata_shards', 0)} metadata")
    if report["fields"]:
        lines.append("fields    (as record 0 stores them)")
        field_rows = [
            [
                f"  {name}",
                spec["dtype"],
                "(" + ", ".join(map(str, spec["shape"])) + ")",
                " ".join(spec["axes"]),
            ]
            for name, spec in report["fields"].items()
        ]
        lines.extend(table(["  name", "dtype", "shape", "axes"], field_rows).splitlines())
    if report["metadata_keys"]:
        keys = ", ".join(f"{key} ({kind})" for key, kind in report["metadata_keys"].items())
        lines.append(f"metadata  {keys}")
    shards = report["shards"]
    if shards:
        lines.append("")
        root = report["root"].removeprefix("file://")
        detailed = "compression" in shards[0]
        header = ["shard", "records", "on disk"]
        if detailed:
            header += ["compression", "group", "decoded", "chunk data", "disk saved"]
        rows = []
        for shard in shards:
            row = [
                _short(os.path.relpath(shard["path"], root)),
                f"{shard['records']:,}",
                size(shard["file_size"]),
            ]
            if detailed:
                row += _detail(shard)
            rows.append(row)
        totals = report["totals"]
        total = ["total", f"{totals['records']:,}", size(totals["file_size"])]
        if detailed:
            total += ["", "", size(totals["decoded_bytes"]), size(totals["encoded_bytes"]), _saved(totals)]
        rows.append(total)
        lines.append(
            table(header, rows, right=[False, True, True, False, True, True, True, True][: len(header)])
        )
        if detailed:
            options = sorted({shard.get("writer_options") or "" for shard in shards} - {""})
            if options:
                lines.append("writer options: " + "; ".join(options))
    if report["native_unavailable"]:
        lines.append(f"\ncompression and group size not shown: {report['native_unavailable']}")
    for note in report["notes"]:
        lines.append("")
        lines.append(textwrap.fill(note, width=88, initial_indent="note: ", subsequent_indent="      "))
    return "\n".join(lines)


def _short(path: str) -> str:
    """A content-addressed shard name cut to 12 hex digits; --json keeps the full path."""
    head, name = os.path.split(path)
    stem, dot, extension = name.partition(".")
    if len(stem) > 16:
        name = f"{stem[:12]}...{dot}{extension}"
    return os.path.join(head, name)


def _detail(shard: Mapping[str, Any]) -> list[str]:
    return [
        shard["compression"],
        str(shard["max_records_per_chunk"]),
        size(shard["decoded_bytes"]),
        size(shard["encoded_bytes"]),
        _saved(shard),
    ]


def _saved(entry: Mapping[str, Any]) -> str:
    """How much smaller the file is than the records it decodes to (negative: larger)."""
    decoded = entry.get("decoded_bytes") or 0
    if not decoded:
        return "-"
    return _percent(1 - entry["file_size"] / decoded)


def _percent(fraction: float) -> str:
    text = f"{fraction:.1%}"
    return "0.0%" if text == "-0.0%" else text


def run(path: str, *, as_json: bool = False) -> int:
    report = collect(path)
    if as_json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(render(report))
    return 0
