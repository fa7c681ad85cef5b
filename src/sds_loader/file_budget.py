"""How many shards a reader keeps open: by default, what the process's file limit allows.

A reader keeps what each shard's footer and index say for every shard it has
touched (a few bytes a record, `BatchReader.index_bytes`), so a shard is never
parsed twice. Open files are another matter: each open shard holds a
descriptor and, while its pages are cached, a mapping, and reading a shard
that is not open costs an open, an fstat and an mmap. A fixed budget of 64
thrashed as soon as a dataset had more shards than that: a shuffled batch
touches most of them. So the default follows the process's limit instead:
the soft `RLIMIT_NOFILE` is raised to the hard one once (which is what the
hard limit is for, and what a training job with many DataLoader workers
needs anyway), and a reader takes half of it, leaving the rest to the
process (worker pipes, shared-memory files, sockets, other readers). It is
capped by the kernel's limit on mappings (`vm.max_map_count`), of which a
reader takes a quarter.
"""

from __future__ import annotations

import functools

#: Never fewer than this, whatever the limits say.
MINIMUM_OPEN_FILES = 16


@functools.cache
def default_open_files() -> int:
    """The open-shard budget of a reader made without `max_open_files`."""
    soft = _raised_file_limit()
    budget = soft // 2 if soft > 0 else 1024
    mappings = _max_map_count()
    if mappings is not None:
        budget = min(budget, mappings // 4)
    return max(MINIMUM_OPEN_FILES, budget)


def _raised_file_limit() -> int:
    """The soft file limit, raised towards the hard one where that is allowed."""
    try:
        import resource
    except ImportError:  # not a POSIX system
        return 0
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # No limit at all counts as 2^20 descriptors, the kernel's usual nr_open.
    unlimited = 1 << 20
    if soft == resource.RLIM_INFINITY:
        return unlimited
    # Only the soft limit moves; the hard one is left as it was.
    target = unlimited if hard == resource.RLIM_INFINITY else hard
    if soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):  # a sandbox may refuse; keep what we have
            pass
    return int(soft)


def _max_map_count() -> int | None:
    try:
        with open("/proc/sys/vm/max_map_count") as file:
            return int(file.read().strip())
    except (OSError, ValueError):
        return None
