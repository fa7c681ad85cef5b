"""The node-local cache of object-store bytes: its settings as a user gives them, its warnings.

`BatchReader(uri, cache_dir=PATH, cache_limit=...)` hands these to the native
source (csrc/sources/node_cache.h), which writes every range it fetches from
S3 or GCS under `PATH` and serves later reads of those bytes from there. Every
process of the node given the same directory shares it: DataLoader workers and
ranks fetch each byte once between them.

`cache_limit` is a number of bytes or a string such as ``"200GB"`` or
``"1.5 GiB"``; by default the cache may take half the space free on the
directory's disk when it opens. Whatever the limit, it never writes when that
would leave fewer than `FLOOR_BYTES` free.
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass

#: Bytes the cache's disk keeps free whatever the limit: a cache must not be
#: what fills the disk a job writes its checkpoints to.
FLOOR_BYTES = 1 << 30

_UNITS = {
    "": 1,
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KIB": 1 << 10,
    "MIB": 1 << 20,
    "GIB": 1 << 30,
    "TIB": 1 << 40,
}

_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*")


@dataclass(frozen=True)
class CacheSettings:
    """Where the node cache lives and how much it may take (limit 0: the default share of free space)."""

    directory: str
    limit: int = 0
    floor: int = FLOOR_BYTES


def parse_cache_limit(value: int | str | None) -> int:
    """Bytes from `value` (an int, or a string such as "200GB" or "512 MiB"); 0 for None (the default)."""
    if value is None:
        return 0
    if isinstance(value, bool):
        raise TypeError(f"cache_limit must be a number of bytes or a string such as '200GB', not {value!r}")
    if isinstance(value, int):
        if value < 1:
            raise ValueError(f"cache_limit must be a positive number of bytes, not {value}")
        return value
    if isinstance(value, str):
        match = _SIZE.fullmatch(value)
        unit = match.group(2).upper() if match else ""
        if match is None or unit not in _UNITS:
            raise ValueError(
                f"cache_limit {value!r} is not a size: give bytes, or a number with one of the units "
                "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB (such as '200GB')"
            )
        size = int(float(match.group(1)) * _UNITS[unit])
        if size < 1:
            raise ValueError(f"cache_limit must be a positive size, not {value!r}")
        return size
    raise TypeError(
        f"cache_limit must be a number of bytes or a string such as '200GB', not {type(value).__name__}"
    )


def cache_settings(
    cache_dir: str | os.PathLike[str] | None, cache_limit: int | str | None
) -> CacheSettings | None:
    """The settings for `cache_dir` (None: no cache), `cache_limit` checked."""
    limit = parse_cache_limit(cache_limit)
    if cache_dir is None:
        if cache_limit is not None:
            raise ValueError("cache_limit is the size of the node cache: give cache_dir too")
        return None
    if not isinstance(cache_dir, str | os.PathLike):
        raise TypeError(f"cache_dir must be a directory path, not {type(cache_dir).__name__}")
    directory = os.fspath(cache_dir)
    if "://" in directory:
        raise ValueError(
            f"cache_dir must be a local directory (the node cache is on this machine's disk), "
            f"not {directory!r}"
        )
    return CacheSettings(directory=os.path.abspath(directory), limit=limit)


#: Warnings already given in this process, one per reason.
_WARNED: set[str] = set()
#: Cache directories found unusable as a whole (`cache_root`), whose one warning is given.
_UNUSABLE: set[str] = set()


def warn_once(reason: str, directory: str | None = None) -> None:
    """Say once per process why the cache is off (reads go on without it).

    With `directory` (the cache root the reason is about), nothing is said
    when that directory was found unusable as a whole: its one warning
    (`warn_unusable`) has said what becomes of reads and of shard tables, and
    what fails in it later is the same cause.
    """
    if directory is not None and directory in _UNUSABLE:
        return
    if reason and reason not in _WARNED:
        _WARNED.add(reason)
        warnings.warn(f"sds_loader node cache: {reason}", RuntimeWarning, stacklevel=3)


def warn_unusable(directory: str, reason: str) -> None:
    """The one warning for a cache `directory` unusable as a whole; later ones about it are not given."""
    warn_once(reason)
    _UNUSABLE.add(directory)


def usable(directory: str) -> None:
    """`directory` is found usable (again): what fails in it later is warned of."""
    _UNUSABLE.discard(directory)
