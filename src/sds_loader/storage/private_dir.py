"""The rule for the node cache's directories and files: this user's own, reached through no link.

A node cache (`cache_dir=`) lives where other processes, and on a shared
node other users, can reach it, and what a reader finds there decides which
bytes, and which shard paths, it trusts. So, as for a dataset's local
shards, nothing in it is taken by name alone:

- The root (`cache_dir`) and every directory of the layout below it are
  created ``0700``. An existing one is used only if it is a directory (not a
  link to one), owned by this process's user, and writable by no one else:
  another user could otherwise have created it (a path on a shared scratch
  disk, say) and planted entries in it. One that fails is refused with one
  warning that names it and the fix, and reads go on without the cache.
  The directories above the root are the system's and are taken as they are
  (those missing are made ``0700``, as the native cache makes them).
- Every file is opened and removed relative to its directory's descriptor,
  without following a link (``O_NOFOLLOW``), without blocking on a FIFO
  (``O_NONBLOCK``), and used only if `fstat` says it is a regular file.

The native cache (csrc/sources/node_cache.cc) applies the same rule to the
same root in its own words; this module is the Python side's, for the
shard tables (`table_files`).
"""

from __future__ import annotations

import errno
import os
import stat

#: How a directory of the cache is opened: never through a link.
DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: How a file of the cache is opened for reading: never through a link, never blocking on a FIFO.
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
#: How a new file of the cache is made: a name of its own, never an existing one or a link.
NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
#: The mode of every directory and file the cache makes.
DIRECTORY_MODE = 0o700
FILE_MODE = 0o600

_FIX = "chmod 700 {path}, or choose a directory of your own"


class Refused(Exception):
    """A directory or file of the cache that is not to be trusted; the message names it and the fix."""


class Unwritable(Refused):
    """A directory of the cache that is missing and cannot be made: the cache is read-only (a
    read-only mount, a directory this user may not write), and holds nothing there to read."""


def _not_made(path: str, error: OSError) -> Refused:
    message = f"cannot create the cache directory {path}: {error.strerror}"
    return Unwritable(message) if error.errno in (errno.EROFS, errno.EACCES) else Refused(message)


def open_root(path: str) -> int:
    """A descriptor of the cache root `path`, or `Refused`.

    The root, and any directory missing on the way to it, is made ``0700``,
    as the native cache makes them; existing ones are left as they are.
    """
    parts = path.rstrip("/").split("/")
    for made in ["/".join(parts[:k]) for k in range(2, len(parts) + 1)]:
        try:
            os.mkdir(made, DIRECTORY_MODE)
        except FileExistsError:
            continue
        except NotADirectoryError:
            break  # below a file: the open below says which
        except OSError as error:
            raise _not_made(made, error) from None
    return _checked(_open_directory(path, None, path), path)


def open_below(directory: int, name: str, path: str) -> int:
    """A descriptor of directory `name` in open directory `directory` (made ``0700`` when missing).

    `path` is the directory's full path, for messages.
    """
    try:
        os.mkdir(name, DIRECTORY_MODE, dir_fd=directory)
    except FileExistsError:
        pass
    except OSError as error:
        raise _not_made(path, error) from None
    return _checked(_open_directory(name, directory, path), path)


def open_file(directory: int, name: str, path: str) -> int | None:
    """A descriptor of regular file `name` in `directory` for reading; None when there is none.

    `Refused` for a link, a FIFO, a device, a socket or a directory there.
    """
    try:
        handle = os.open(name, FILE_FLAGS, dir_fd=directory)
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise Refused(f"{path} is a symbolic link, and the cache uses only files of its own") from None
        raise Refused(f"cannot open {path}: {error.strerror}") from None
    try:
        info = os.fstat(handle)
    except OSError:
        os.close(handle)
        raise
    if not stat.S_ISREG(info.st_mode):
        os.close(handle)
        raise Refused(
            f"{path} is not a regular file (a FIFO, device, socket or directory), and the cache "
            "uses only regular files of its own"
        )
    return handle


def _open_directory(name: str, directory: int | None, path: str) -> int:
    try:
        return os.open(name, DIRECTORY_FLAGS, dir_fd=directory)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            raise Refused(f"{not_a_directory(path)}; give cache_dir a directory of your own") from None
        raise Refused(f"cannot open the cache directory {path}: {error.strerror}") from None


def not_a_directory(path: str) -> str:
    """What stands where directory `path` should: a link, a file, or a file above it."""
    if os.path.islink(path):
        return f"{path} is a symbolic link, not a directory of its own"
    if os.path.isfile(path):
        return f"{path} is a file, not a directory"
    if os.path.lexists(path):
        return f"{path} is not a directory (a FIFO, device or socket)"
    above = os.path.dirname(path)
    while not os.path.lexists(above) and above != os.path.dirname(above):
        above = os.path.dirname(above)
    if os.path.lexists(above) and not os.path.isdir(above):
        return f"{path} lies below {above}, which is a file, not a directory"
    return f"{path} is not a directory of its own"


def _checked(handle: int, path: str) -> int:
    """`handle`, if it is a directory of this user's that no one else may write to; else `Refused`."""
    try:
        reason = refusal(os.fstat(handle), path)
    except OSError as error:
        reason = f"cannot look at the cache directory {path}: {error.strerror}"
    if reason is not None:
        os.close(handle)
        raise Refused(reason)
    return handle


def refusal(info: os.stat_result, path: str) -> str | None:
    """Why a directory with status `info` is not to be trusted, or None."""
    if not stat.S_ISDIR(info.st_mode):
        return f"{path} is not a directory; give cache_dir a directory of your own"
    if info.st_uid != os.geteuid():
        return (
            f"{path} belongs to user {info.st_uid}, not to this process's user {os.geteuid()}, so "
            "another user may have put entries in it; choose a directory of your own"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return (
            f"{path} may be written by other users (mode {stat.S_IMODE(info.st_mode):04o}), who could "
            f"put entries in it; {_FIX.format(path=path)}"
        )
    return None
