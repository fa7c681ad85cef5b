"""Shard tables handed to a spawned process beside its pickle, not inside it.

multiprocessing starts a spawned child by writing the child's whole pickle
into a pipe, and the parent waits in that write until the child has read it
all. The child reads as it unpickles, and one of the first things it meets
(torch's worker loop, for a DataLoader) imports torch, a second or more. A
pickle that fits the pipe's 64 KiB is written at once; a larger one holds
the parent until the child's imports are done, and a DataLoader starts its
workers one after another, so each worker waits on the one before it. The
tables of 10,000 shards are 640 kB.

So while multiprocessing pickles for a spawned (or forkserver) child, which
it says through `get_spawning_popen`, tables larger than `INLINE_BYTES` go
to a file of this user's, and the pickle carries the file's name and the
SHA-256 of its bytes. The child checks the bytes against that digest, which
came through the pipe, so the file is trusted exactly as far as the pipe.
Any other pickle (Ray's, a user's, one bound for another machine, where the
file would not be) carries the tables inline, as before.

A file is written once per set of tables and process, and removed when that
process exits; the files of a process that was killed are removed by the
next one that writes here. A child that cannot read its file (removed,
damaged, refused) builds the tables from the manifests itself: slower,
never wrong.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import pickle
import secrets
import tempfile
import threading
from dataclasses import dataclass
from multiprocessing import context as mp_context
from typing import Any

from sds_loader.storage import private_dir

#: Tables whose pickle is at most this long travel inside the child's pickle.
INLINE_BYTES = 16 << 10
#: The folder under the system's temporary directory, one per user.
FOLDER = f"sds-loader-{os.geteuid()}"
_PREFIX = "tables-"


@dataclass(frozen=True)
class TablesFile:
    """Where a spawned child finds its tables, and what their bytes hash to."""

    path: str
    sha256: str
    size: int


_lock = threading.Lock()
#: digest -> the file this process wrote for it.
_written: dict[str, TablesFile] = {}
_writer_pid = os.getpid()


def parcel(tables: dict[str, Any]) -> object:
    """What a pickle carries of `tables`: the tables, or a `TablesFile` when it is for a spawned child."""
    if not tables or mp_context.get_spawning_popen() is None:
        return tables
    data = pickle.dumps(tables, protocol=pickle.HIGHEST_PROTOCOL)
    if len(data) <= INLINE_BYTES:
        return tables
    written = _write(data)
    return tables if written is None else written


def unpack(carried: object) -> dict[str, Any]:
    """The tables a pickle `carried`; none when its file cannot be read (the child builds its own)."""
    if isinstance(carried, dict):
        return carried
    if not isinstance(carried, TablesFile):
        return {}
    data = _read(carried)
    if data is None:
        return {}
    tables = pickle.loads(data)
    return tables if isinstance(tables, dict) else {}


def _folder_path() -> str:
    return os.path.join(tempfile.gettempdir(), FOLDER)


def _folder() -> int | None:
    try:
        return private_dir.open_root(_folder_path())
    except private_dir.Refused:
        return None  # the tables then go inline: slower to start, nothing else


def _write(data: bytes) -> TablesFile | None:
    digest = hashlib.sha256(data).hexdigest()
    with _lock:
        _forget_after_fork()
        if digest in _written:
            return _written[digest]
        folder = _folder()
        if folder is None:
            return None
        try:
            _remove_orphans(folder)
            name = f"{_PREFIX}{os.getpid()}-{digest[:32]}"
            temporary = f".{name}.{secrets.token_hex(8)}.tmp"
            handle = os.open(temporary, private_dir.NEW_FILE_FLAGS, private_dir.FILE_MODE, dir_fd=folder)
            try:
                with os.fdopen(handle, "wb") as opened:
                    opened.write(data)
                os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
            except BaseException:
                os.unlink(temporary, dir_fd=folder)
                raise
        except OSError:
            return None
        finally:
            os.close(folder)
        written = TablesFile(os.path.join(_folder_path(), name), digest, len(data))
        if not _written:
            atexit.register(_remove_written)
        _written[digest] = written
        return written


def _read(carried: TablesFile) -> bytes | None:
    folder_path, name = os.path.split(carried.path)
    if os.path.basename(folder_path) != FOLDER or not name.startswith(_PREFIX):
        return None
    try:
        folder = private_dir.open_root(folder_path)
    except private_dir.Refused:
        return None
    try:
        handle = private_dir.open_file(folder, name, carried.path)
    except (private_dir.Refused, OSError):
        return None
    finally:
        os.close(folder)
    if handle is None:
        return None
    with os.fdopen(handle, "rb") as opened:
        data = opened.read(carried.size + 1)
    if len(data) != carried.size or hashlib.sha256(data).hexdigest() != carried.sha256:
        return None
    return data


def _remove_orphans(folder: int) -> None:
    """Removes the table files of processes that are gone (killed before they could)."""
    for name in os.listdir(folder):
        if not name.startswith(_PREFIX):
            continue
        pid_text = name[len(_PREFIX) :].partition("-")[0]
        if not pid_text.isdigit() or _alive(int(pid_text)):
            continue
        try:
            os.unlink(name, dir_fd=folder)
        except OSError:
            pass  # another process removed it first


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process of that number: not ours to judge
    return True


def _forget_after_fork() -> None:
    """A forked child writes files of its own: its parent's go when its parent exits."""
    global _writer_pid
    if os.getpid() != _writer_pid:
        _written.clear()
        _writer_pid = os.getpid()


def _remove_written() -> None:
    if os.getpid() != _writer_pid:
        return
    for written in _written.values():
        try:
            os.unlink(written.path)
        except OSError:
            pass
    _written.clear()
