"""Shard tables kept as files in a node cache, for the other ranks and jobs of a node.

A forked worker shares its parent's table and a spawned one receives it
pickled (dataset.py), but the ranks of a job on one node are started
apart, and each would read every manifest page again: for a dataset in
object storage, a round of GETs per page per rank. With a node cache
(`cache_dir=`), the first process to tabulate a snapshot writes its table
to `<cache_dir>/tables/<identity>.npz`, and the others load it.

A file is used only if it names the identity asked for and its arrays are
whole and consistent (a checksum over them, starts that rise to the
dataset's length, file numbers within the names): a damaged or foreign file
is ignored and replaced. Files are written under a temporary name and
renamed, so a process killed mid-write leaves nothing that is read.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
from typing import Any

import numpy as np

from sds_loader.shard_names import DIGEST_BYTES, ShardNames

#: Bumped when the file's contents change meaning.
FORMAT = 1
_ARRAYS = ("starts", "skips", "files", "sizes")


def path_for(directory: str, identity: str) -> str:
    return os.path.join(directory, "tables", f"{identity}.npz")


def load(directory: str, identity: str, records: int) -> dict[str, Any] | None:
    """The fields of a ShardTable kept for `identity`, or None if there is no good one."""
    try:
        with open(path_for(directory, identity), "rb") as handle:
            payload = handle.read()
        with np.load(io.BytesIO(payload), allow_pickle=False) as stored:
            header = json.loads(bytes(stored["header"]).decode())
            arrays = {name: np.asarray(stored[name]) for name in (*_ARRAYS, "digests")}
    except Exception:  # noqa: BLE001 - a file that does not read back whole is no table
        return None
    if header.get("format") != FORMAT or header.get("identity") != identity:
        return None
    if header.get("checksum") != _checksum(arrays, header):
        return None
    starts, files = arrays["starts"], arrays["files"]
    if arrays["digests"].size:
        names = ShardNames(
            root=str(header["root"]),
            kind=str(header["kind"]),
            digests=arrays["digests"].reshape(-1, DIGEST_BYTES),
        )
    else:
        names = ShardNames(list(header["paths"]))
    consistent = (
        all(arrays[name].dtype == np.int64 and arrays[name].ndim == 1 for name in _ARRAYS)
        and starts.size >= 1
        and starts[-1] == records
        and bool(np.all(np.diff(starts) >= 0))
        and files.size == starts.size
        and skips_ok(arrays["skips"], starts.size)
        and (files.size <= 1 or int(files[:-1].max(initial=0)) < len(names))
        and arrays["sizes"].size == len(names)
    )
    if not consistent:
        return None
    return {"paths": names, **{name: arrays[name] for name in _ARRAYS}, "root": str(header["table_root"])}


def skips_ok(skips: np.ndarray, count: int) -> bool:
    return skips.size == count and bool(np.all(skips >= 0))


def save(directory: str, identity: str, table: Any) -> None:
    """Keep `table` for `identity`; a cache that cannot take it is simply not used for tables."""
    names = table.paths if isinstance(table.paths, ShardNames) else ShardNames(list(table.paths))
    arrays = {name: np.asarray(getattr(table, name), dtype=np.int64) for name in _ARRAYS}
    if names.compact:
        root, _, kind = names.prefix.rstrip("/").rpartition("/objects/")
        arrays["digests"] = names.digests.reshape(-1)
        header: dict[str, Any] = {"root": root, "kind": kind, "paths": []}
    else:
        arrays["digests"] = np.zeros(0, dtype=np.uint8)
        header = {"root": "", "kind": "", "paths": list(names)}
    header.update(format=FORMAT, identity=identity, table_root=table.root)
    header["checksum"] = _checksum(arrays, header)
    folder = os.path.join(directory, "tables")
    try:
        os.makedirs(folder, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(prefix=f".{identity}.", dir=folder)
        try:
            stored: dict[str, Any] = {"header": np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)}
            stored.update(arrays)
            with os.fdopen(descriptor, "wb") as handle:
                np.savez(handle, **stored)
            os.replace(temporary, path_for(directory, identity))
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError:
        return


def _checksum(arrays: dict[str, np.ndarray], header: dict[str, Any]) -> str:
    digest = hashlib.sha256()
    for name in (*_ARRAYS, "digests"):
        digest.update(name.encode())
        digest.update(np.ascontiguousarray(arrays[name]).tobytes())
    described = {key: header[key] for key in ("root", "kind", "paths", "identity", "table_root")}
    digest.update(json.dumps(described, sort_keys=True).encode())
    return digest.hexdigest()
