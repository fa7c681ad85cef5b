"""A snapshot's shard entries, read from its manifest pages once, into compact arrays.

signal_dataset's reader turns each manifest page into a `Manifest` of
`ShardEntry` objects, three `pathlib` paths validated per entry: about 50 µs a
shard, half a second for a page of 10,000 shards, paid again by every process
that opens the dataset. Its `locate` then rebuilds the tuple of every shard
start of the page for each ordinal it resolves, so `read_instructions` over a
whole dataset is quadratic in the shards of a page.

This module reads each page as signal_dataset's own control-document read
(`read_document`) does: through the dataset's store object, with its size
and generation checks, its strict JSON decoding and its limits (the node
count from the page's known shape rather than a walk of every node, which
costs signal_dataset half its read). It checks the page against the
snapshot's reference to it as signal_dataset's `_manifest` does, and takes
the entries straight into arrays: first ordinal, record count, declared sizes, and the shard's name.
Names under signal_dataset's fixed layout
(`objects/{data,metadata}/<2 hex>/<64 hex>.arrayrecord`) are kept as their
32-byte digests (`shard_names.ShardNames`). A page holding anything else (a
reference dataset's explicit records, absolute paths, another layout, a field
this module does not know) is parsed by signal_dataset's own `Manifest`, so
its validation decides what such entries mean; the fixed-layout pattern only
admits paths that signal_dataset's `safe_relative_path` admits too.

`signal_dataset`'s private `_Index` (its snapshot, store and options) is
reached here and in `dataset` only; tests/core/test_addressing.py
compares the arrays with `read_instructions` for every shard, so a change in
signal_dataset fails there rather than reading other records.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import signal_dataset as sds
from signal_dataset import CorruptDatasetError
from signal_dataset.storage.paths import join_uri

from sds_loader.shard_names import DIGEST_BYTES

_ENTRY_KEYS = frozenset({"data", "metadata", "first_ordinal", "record_count"})
_OBJECT_KEYS = frozenset({"path", "stored_bytes"})


class NotFixedLayout(Exception):
    """A page holds entries the fast path does not read; signal_dataset's parser reads it."""


@dataclass(frozen=True)
class EntryArrays:
    """Every shard entry of a snapshot, in ordinal order, for data or metadata shards."""

    #: First ordinal and record count of each entry.
    first: np.ndarray
    counts: np.ndarray
    #: The bytes each entry's object declares.
    sizes: np.ndarray
    #: Each entry's 32-byte digest (rows), under `kind`'s directory of the root.
    digests: np.ndarray
    kind: str


def fixed_layout_entries(dataset: sds.Dataset, *, metadata: bool) -> EntryArrays | None:
    """The snapshot's entries as arrays, or None if a page is not all in the fixed layout.

    Raises `CorruptDatasetError` as signal_dataset does for a page that does not
    match the snapshot's reference to it.
    """
    kind = "metadata" if metadata else "data"
    columns: list[tuple[np.ndarray, np.ndarray, np.ndarray, bytes, int]] = []
    try:
        pages = dataset._index.snapshot.manifests
        for reference, page in zip(pages, _pages(dataset), strict=False):
            columns.append(_take(page, kind))
            if columns[-1][4] != reference.stored_bytes:
                raise CorruptDatasetError("manifest stored bytes do not match snapshot reference")
    except NotFixedLayout:
        return None
    joined = b"".join(column[3] for column in columns)
    return EntryArrays(
        first=np.concatenate([column[0] for column in columns] or [np.zeros(0, np.int64)]),
        counts=np.concatenate([column[1] for column in columns] or [np.zeros(0, np.int64)]),
        sizes=np.concatenate([column[2] for column in columns] or [np.zeros(0, np.int64)]),
        digests=np.frombuffer(joined, dtype=np.uint8).reshape(-1, DIGEST_BYTES).copy(),
        kind=kind,
    )


def _pages(dataset: sds.Dataset) -> Iterator[list[Any]]:
    """Each manifest page's list of entries, read and checked as signal_dataset's `_manifest` reads it."""
    try:
        from signal_dataset._internal.constants import MANIFEST_FORMAT, SUPPORTED_LAYOUT_VERSIONS

        index = dataset._index
        references = index.snapshot.manifests
        objects = index.objects
        policy = index.options.control
    except (AttributeError, ImportError) as exc:
        raise NotFixedLayout(f"signal_dataset no longer keeps its index where it was ({exc})") from None
    for reference in references:
        uri = join_uri(dataset.root, reference.object.path)
        info = objects.info(uri, generation=reference.object.generation)
        if info.size != reference.object.stored_bytes:
            raise CorruptDatasetError("manifest stored_bytes does not match object")
        generation = reference.object.generation
        if generation is not None and info.generation != generation:
            raise CorruptDatasetError(f"JSON document {uri!r} generation does not match")
        value = _read_page(objects, uri, info.size, reference.object.generation, policy)
        shards = value.get("shards")
        if (
            value.keys() != _PAGE_KEYS
            or value["format"] != MANIFEST_FORMAT
            or value["layout_version"] not in SUPPORTED_LAYOUT_VERSIONS
            or not isinstance(shards, list)
            or value["first_ordinal"] != reference.first_ordinal
            or value["record_count"] != reference.record_count
            or len(shards) != reference.shard_count
        ):
            # signal_dataset's own parser says what is wrong with it.
            raise NotFixedLayout("a manifest page does not match its reference")
        yield shards


#: The keys of a manifest page, as signal_dataset writes them.
_PAGE_KEYS = frozenset({"first_ordinal", "format", "layout_version", "record_count", "shards"})


def _read_page(objects: Any, uri: str, size: int, generation: int | None, policy: Any) -> dict[str, Any]:
    """A manifest page as signal_dataset's `read_document` reads it, minus its walk of every node.

    The same store calls and size, generation and JSON rules (its own strict
    decoder hook: duplicate keys and non-finite numbers refused); the node
    and depth limits are checked by `_take`, which knows the page's shape.
    """
    from signal_dataset._internal.json import _strict_object

    if size > policy.max_document_bytes:
        raise CorruptDatasetError(f"JSON document {uri!r} exceeds max_document_bytes")
    payload = objects.read(uri, generation=generation)
    if len(payload) > policy.max_document_bytes:
        raise CorruptDatasetError(f"JSON document {uri!r} exceeds max_document_bytes")

    def refuse(constant: str) -> None:
        raise ValueError(f"non-finite JSON number {constant!r}")

    try:
        value = json.loads(payload, parse_constant=refuse, object_pairs_hook=_strict_object)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise CorruptDatasetError(f"invalid JSON document {uri!r}: {exc}") from exc
    if not isinstance(value, dict):
        raise NotFixedLayout("a manifest page is not a JSON object")
    # Nodes as signal_dataset counts them: the page, its five values, and per
    # entry the entry, its four values and each object's two or three.
    shards = value.get("shards")
    entries = len(shards) if isinstance(shards, list) else 0
    if 6 + 13 * entries > policy.max_json_nodes or 4 > policy.max_json_depth:
        raise NotFixedLayout("a manifest page reaches signal_dataset's JSON limits")
    return value


def _integers(values: list[Any]) -> np.ndarray:
    """`values` as int64, if every one is a non-negative int (not a bool, not a float)."""
    if values and set(map(type, values)) != {int}:
        raise NotFixedLayout("not every value is an integer")
    array = np.asarray(values, dtype=np.int64)
    if array.size and array.min() < 0:
        raise NotFixedLayout("a count or size is negative")
    return array


def _take(entries: list[Any], kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, bytes, int]:
    """(first ordinals, record counts, sizes, digests, bytes the page's objects declare) of a page.

    Column by column, each check over the whole page at once: a page of
    10,000 entries costs a few milliseconds, not the 50 ms a loop over its
    entries costs.
    """
    other = "metadata" if kind == "data" else "data"
    if set(map(type, entries)) - {dict} or any(entry.keys() != _ENTRY_KEYS for entry in entries):
        raise NotFixedLayout("an entry has fields the fast path does not read")
    references = [entry[kind] for entry in entries]
    besides = [entry[other] for entry in entries]
    objects = references + besides
    if set(map(type, objects)) - {dict} or any(item.keys() != _OBJECT_KEYS for item in objects):
        raise NotFixedLayout("an object reference has fields the fast path does not read")
    paths = [item["path"] for item in references]
    if set(map(type, paths)) - {str}:
        raise NotFixedLayout("a path is not a string")
    # Every path is `objects/<kind>/<2 hex>/<64 hex>.arrayrecord`, one line each.
    pattern = _FIXED_LAYOUT_LINES[kind]
    if paths and pattern.fullmatch("\n".join(paths) + "\n") is None:
        raise NotFixedLayout("a path is not in the fixed layout")
    at = len(f"objects/{kind}/")
    if any(path[at : at + 2] != path[at + 3 : at + 5] for path in paths):
        raise NotFixedLayout("a path's directory is not its digest's first byte")
    digests = bytes.fromhex("".join(path[at + 3 : at + 3 + 2 * DIGEST_BYTES] for path in paths))
    sizes = _integers([item["stored_bytes"] for item in references])
    stored = int(sizes.sum()) + int(_integers([item["stored_bytes"] for item in besides]).sum())
    firsts = _integers([entry["first_ordinal"] for entry in entries])
    counts = _integers([entry["record_count"] for entry in entries])
    return firsts, counts, sizes, digests, stored


#: The fixed layout's paths of one kind, each followed by a newline.
_FIXED_LAYOUT_LINES = {
    kind: re.compile(rf"(?:objects/{kind}/[0-9a-f]{{2}}/[0-9a-f]{{64}}\.arrayrecord\n)*")
    for kind in ("data", "metadata")
}
