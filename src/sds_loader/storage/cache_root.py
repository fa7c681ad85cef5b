"""A cache directory looked at once, when a reader opens: one cause, one warning.

The node cache (csrc/sources/node_cache.cc, bytes fetched from object
storage) and the shard tables (`table_files`) keep their files under the
same `cache_dir`, and each would find on its own, in its own words, that the
directory is a file, lies below one, or sits on a read-only mount. So the
directory is looked at here first, by `private_dir`'s rule: when it cannot
hold a cache, one warning names it and the cause and says what becomes of
reads and of shard tables, and the two parts say nothing more of it
(`cache_settings.warn_once`). What either finds later in a usable directory
(a link planted below it, a full disk) is a cause of its own, and is warned
of as before.
"""

from __future__ import annotations

import os

from sds_loader.storage import private_dir
from sds_loader.storage.cache_settings import CacheSettings, usable, warn_unusable

#: What becomes of a reader's work when its cache directory cannot be used at all.
_UNUSED_FETCHING = (
    "Meanwhile reads go to the store without the node cache, and shard tables are read from the "
    "dataset's manifests by each process"
)
_UNUSED_LOCAL = (
    "Meanwhile shard tables are read from the dataset's manifests by each process (reads of local "
    "shards are not affected)"
)


def check(cache: CacheSettings, *, fetches: bool) -> None:
    """Warn once if `cache`'s directory cannot hold a cache, saying what becomes of reads and tables.

    `fetches`: whether the reader fetches its shards from object storage,
    whose reads the node cache serves; a local dataset keeps only its shard
    tables there. The directory is made (``0700``) when it is missing, as
    either part would make it.
    """
    directory = cache.directory
    try:
        handle = private_dir.open_root(directory)
    except private_dir.Refused as refused:
        warn_unusable(directory, f"{refused}. {_UNUSED_FETCHING if fetches else _UNUSED_LOCAL}")
        return
    try:
        read_only = bool(os.fstatvfs(handle).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    finally:
        os.close(handle)
    if not read_only:
        usable(directory)
        return
    # Not "reads go without it": what it already holds is the node cache's to serve or not.
    added = (
        "what it holds is read, checked as ever, bytes fetched from the store are not added to it, and "
        if fetches
        else ""
    )
    warn_unusable(
        directory,
        f"{directory} is on a read-only file system: {added}shard tables it does not hold are read "
        "from the dataset's manifests by each process; give cache_dir a writable directory of your "
        "own to keep them",
    )
