"""Which announcements a dataset carries out in this process: those whose bytes a reader here will use.

`ShardAwareSampler` runs in the process that iterates the DataLoader and
announces upcoming records to `SDSTorchDataset.will_need` there. For local
shards that serves everyone: `posix_fadvise` fills the page cache, which the
DataLoader's workers share. For object storage the bytes are fetched into
the announcing process's own readahead memory, and with DataLoader workers
the main process reads no batch: everything it fetched ahead was fetched
again by the workers (an epoch cost twice the data's bytes, and the main
process's memory).

So a dataset that has gone to other processes (forked, or pickled for
spawned workers) drops announcements for object storage, in the process it
went from, unless it has a node cache: there the bytes fetched ahead land in
the cache every process of the node reads, and the workers find them there;
they are fetched into the node cache only, not into this process's memory
too, which no read here would use.
A forked or spawned copy (a worker) carries out its own announcements as
usual. What decides is the dataset having been handed on, not whether a
DataLoader is iterating now: the main process cannot see its workers' reads,
and a fork after the dataset was made is how a DataLoader starts them.
"""

from __future__ import annotations

import os
import weakref

from sds_loader.storage.sources import is_remote

#: The datasets made in (or handed to) this process.
_LIVE: weakref.WeakSet[object] = weakref.WeakSet()
#: Those that have gone to other processes since.
_HANDED_ON: weakref.WeakSet[object] = weakref.WeakSet()


def track(dataset: object) -> None:
    """Note `dataset`, made (or unpickled) in this process: it reads ahead here."""
    _LIVE.add(dataset)
    _HANDED_ON.discard(dataset)


def handed_on(dataset: object) -> None:
    """`dataset` is being pickled for another process (a spawned worker)."""
    _HANDED_ON.add(dataset)


def reads_ahead_here(dataset: object, uri: str, cached: bool) -> bool:
    """Whether `dataset`'s announcements are carried out in this process."""
    return cached or not is_remote(uri) or dataset not in _HANDED_ON


def serves_others(dataset: object) -> bool:
    """Whether `dataset` has gone to other processes, whose reads its announcements serve."""
    return dataset in _HANDED_ON


def _before_fork() -> None:
    # The child is a copy that reads (a DataLoader worker): this process no longer does.
    _HANDED_ON.update(_LIVE)


def _in_child() -> None:
    _HANDED_ON.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_in_child)
