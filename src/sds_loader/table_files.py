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

What is trusted: the directory and the file, as `storage/private_dir`
rules (this user's own directories, no link followed, regular files only;
a directory that fails is refused with one warning, and tables are then
read from the manifests, as without a cache). And the names a table gives:
a checksum only shows that the file is whole, not who wrote it, so before
any path in it is opened every shard it names must be one of the dataset's
own: under its root, in the layout its manifests use (`Origin`). A table
that names another is refused with a warning, rebuilt and replaced. A
dataset whose manifests name shards of other datasets (a published view)
keeps no table file: nothing short of reading its manifests tells a true
reference from a forged one, so each process reads them.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import secrets
from dataclasses import dataclass
from typing import Any

import numpy as np
from signal_dataset.storage.paths import relative_uri

from sds_loader.shard_names import DIGEST_BYTES, ShardNames
from sds_loader.storage import private_dir
from sds_loader.storage.cache_settings import warn_once

#: Bumped when the file's contents change meaning.
FORMAT = 1
_ARRAYS = ("starts", "skips", "files", "sizes")


#: The layout directory below the cache root that holds the tables.
FOLDER = "tables"


@dataclass(frozen=True)
class Origin:
    """Which shards a table of a dataset may name: its own, under `root`, of `kind`.

    `root`: the dataset's root as its table's names begin (no ``file://``);
    `kind`: "data" or "metadata"; `table_root`: the directory local shards
    are confined to ("" for object storage).
    """

    root: str
    kind: str
    table_root: str


def path_for(directory: str, identity: str) -> str:
    return os.path.join(directory, FOLDER, f"{identity}.npz")


def load(directory: str, identity: str, records: int, origin: Origin) -> dict[str, Any] | None:
    """The fields of a ShardTable kept for `identity`, or None if there is no good one."""
    folder = _folder(directory)
    if folder is None:
        return None
    path = path_for(directory, identity)
    try:
        handle = private_dir.open_file(folder, f"{identity}.npz", path)
        if handle is None:
            return None
        with os.fdopen(handle, "rb") as opened:
            payload = opened.read()
    except private_dir.Refused as refused:
        warn_once(f"{refused}; the shard table is read from the dataset's manifests instead")
        return None
    except OSError:
        return None
    finally:
        os.close(folder)
    try:
        with np.load(io.BytesIO(payload), allow_pickle=False) as stored:
            header = json.loads(bytes(stored["header"]).decode())
            arrays = {name: np.asarray(stored[name]) for name in (*_ARRAYS, "digests")}
    except Exception:  # noqa: BLE001 - a file that does not read back whole is no table
        return None
    if header.get("format") != FORMAT or header.get("identity") != identity:
        return None
    if header.get("checksum") != _checksum(arrays, header):
        return None
    foreign = _foreign_name(header, origin, compact=bool(arrays["digests"].size))
    if foreign is not None:
        warn_once(
            f"the shard table {path} names {foreign}, which is not one of {origin.root}'s own shards; "
            "it is ignored and replaced (whoever can write to the cache directory wrote it)"
        )
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


def _foreign_name(header: dict[str, Any], origin: Origin, *, compact: bool) -> str | None:
    """The first name (or root) in `header` that is not one of `origin`'s own shards, or None."""
    if header.get("table_root") != origin.table_root:
        return f"shards confined to {header.get('table_root')!r}"
    if compact:
        # Every name is `<root>/objects/<kind>/<digest>`: the root and kind say where they all lie.
        root = header.get("root")
        if (
            not isinstance(root, str)
            or root.rstrip("/") != origin.root.rstrip("/")
            or (header.get("kind") != origin.kind)
        ):
            return f"the {header.get('kind')!r} shards of {root!r}"
        return None
    paths = header.get("paths")
    if not isinstance(paths, list):
        return "no list of shards"
    for path in paths:
        if not _own(path, origin.root):
            return repr(path)
    return None


def _own(path: object, root: str) -> bool:
    """Whether `path` is a shard below `root`, by a path that stays inside it."""
    if not isinstance(path, str):
        return False
    try:
        relative_uri(root, path)
    except ValueError:
        return False
    return True


def _folder(directory: str) -> int | None:
    """A descriptor of `directory`'s tables folder, or None (with one warning) if it is refused.

    A read-only cache without one has no tables to read, and takes none: no warning (the
    native cache serves its entries all the same, and warns of a root it cannot use)."""
    try:
        root = private_dir.open_root(directory)
    except private_dir.Unwritable:
        return None
    except private_dir.Refused as refused:
        warn_once(f"{refused}; shard tables are not kept in it", directory)
        return None
    try:
        return private_dir.open_below(root, FOLDER, os.path.join(directory, FOLDER))
    except private_dir.Unwritable:
        return None
    except private_dir.Refused as refused:
        warn_once(f"{refused}; shard tables are not kept in it", directory)
        return None
    finally:
        os.close(root)


def skips_ok(skips: np.ndarray, count: int) -> bool:
    return skips.size == count and bool(np.all(skips >= 0))


def save(directory: str, identity: str, table: Any, origin: Origin) -> None:
    """Keep `table` for `identity`; a cache that cannot take it is simply not used for tables.

    A table naming shards that are not `origin`'s own (a view's) is not kept:
    `load` could not tell it from a forged one.
    """
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
    if _foreign_name(header, origin, compact=names.compact) is not None:
        return
    header["checksum"] = _checksum(arrays, header)
    folder = _folder(directory)
    if folder is None:
        return
    # A name of this process's and this call's own: another writer's is never touched.
    temporary = f".{identity}.{os.getpid()}.{secrets.token_hex(8)}.tmp"
    try:
        handle = os.open(temporary, private_dir.NEW_FILE_FLAGS, private_dir.FILE_MODE, dir_fd=folder)
        try:
            stored: dict[str, Any] = {"header": np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)}
            stored.update(arrays)
            with os.fdopen(handle, "wb") as opened:
                np.savez(opened, **stored)
            # Renaming replaces whatever has the name (a link itself, never its target).
            os.replace(temporary, f"{identity}.npz", src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            os.unlink(temporary, dir_fd=folder)
            raise
    except OSError:
        return
    finally:
        os.close(folder)


def _checksum(arrays: dict[str, np.ndarray], header: dict[str, Any]) -> str:
    digest = hashlib.sha256()
    for name in (*_ARRAYS, "digests"):
        digest.update(name.encode())
        digest.update(np.ascontiguousarray(arrays[name]).tobytes())
    described = {key: header[key] for key in ("root", "kind", "paths", "identity", "table_root")}
    digest.update(json.dumps(described, sort_keys=True).encode())
    return digest.hexdigest()
