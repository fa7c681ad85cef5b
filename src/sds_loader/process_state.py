"""What a reader holds in one process: its open dataset, shards, sources and helper.

None of it may cross a fork or a pickle: descriptors, mappings, connections,
threads and the fallback's helper process belong to the process that made
them. A `BatchReader` keeps only its settings, and its `PerProcess` makes a
`ProcessState` on first use in each process (the parent, each forked or
spawned worker), so a reader made before `DataLoader` starts its workers is
safe to hand them.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from signal_dataset.storage import ObjectStore, S3Options

from sds_loader import stage_times
from sds_loader.annotations import AnnotationSource
from sds_loader.checksums import VerifyChecksums, verifies_every_read
from sds_loader.dataset import ShardTable, native_unavailable_reason, open_dataset, shard_table
from sds_loader.fallback import FallbackReader
from sds_loader.metadata import MetadataShards
from sds_loader.storage import cache_root, control_reads, sources
from sds_loader.storage.cache_settings import CacheSettings
from sds_loader.storage.remote_readahead import RemoteReadahead
from sds_loader.storage.stores import for_root
from sds_loader.storage.timeouts import Timeouts

if TYPE_CHECKING:
    from sds_loader.schema import Schema


class ProcessState:
    """Everything that must not cross a fork: open dataset, native file cache."""

    def __init__(
        self,
        uri: str,
        object_store: ObjectStore | S3Options | None,
        verify_checksums: VerifyChecksums,
        max_open_files: int,
        requests_in_flight: int | None,
        cache: CacheSettings | None = None,
        timeouts: Timeouts | None = None,
    ) -> None:

        self.pid = os.getpid()
        store = for_root(uri, object_store)
        with control_reads.coalesced(store):
            self.dataset = open_dataset(uri, object_store=store)
            # Before any source is made for its shards: records', metadata's, annotations'.
            sources.use_cache(self.dataset, cache)
            if cache is not None:  # before the node cache or a shard table looks at it
                cache_root.check(cache, fetches=sources.is_remote(str(self.dataset.root)))
            self.native_reason = native_unavailable_reason(self.dataset)
            self.table: ShardTable | None = None
            if self.native_reason is None:
                self.table = shard_table(self.dataset)
        self.fallback = FallbackReader(
            uri,
            self.dataset.object_store,
            verify_checksums=verifies_every_read(verify_checksums),
            max_open_files=max_open_files,
        )
        self.native = None
        self.source = None
        #: One run of a batch in how many this reader times stage by stage (0: none).
        self.stage_sampling = stage_times.sampling()
        if self.native_reason is None:
            assert self.table is not None
            self.source = sources.for_shards(
                self.dataset, self.table.paths, requests_in_flight=requests_in_flight, timeouts=timeouts
            )
            self.native = self.table.native(verify_checksums, max_open_files, self.source)
            self.native.stage_sampling = self.stage_sampling
        self._verify = verify_checksums
        self._max_open_files = max_open_files
        self._metadata: MetadataShards | None = None
        #: The schema last read natively, and the core's form of it (schema.native_layout).
        self.layout: tuple[Schema, Any] | None = None
        #: The source's counters as last added to the reader's stats.
        self.counted = (0, 0, 0, 0)
        self.cache_counted = (0, 0, 0, 0)
        #: Carries out announcements for object storage (its thread starts on the first).
        self._readahead = (
            RemoteReadahead(self.native, self.source)
            if self.native is not None and self.source is not None
            else None
        )
        self._annotations: AnnotationSource | None = None

    def readahead(self) -> RemoteReadahead:
        assert self._readahead is not None, "only a reader of object storage reads ahead remotely"
        return self._readahead

    @property
    def metadata(self) -> MetadataShards:
        """The metadata shards (layouts, lengths, documents, columns, ids), opened on first use."""
        if self._metadata is None:
            self._metadata = MetadataShards(
                self.dataset,
                self.fallback,
                verify_checksums=self._verify,
                max_open_files=self._max_open_files,
            )
        return self._metadata

    @property
    def annotations(self) -> AnnotationSource:
        """The dataset's annotation sets, opened on first use."""
        if self._annotations is None:
            if self.native_reason is not None:
                raise NotImplementedError(
                    f"annotation sets are read natively, and this dataset is not: {self.native_reason}"
                )
            self._annotations = AnnotationSource(
                self.dataset,
                self.metadata,
                verify_checksums=self._verify,
                max_open_files=self._max_open_files,
            )
        return self._annotations

    def fetched(self) -> tuple[int, int, int, int]:
        """(requests, bytes, retries, refetches) of this process's fetches from object storage so far."""
        if self.source is None:
            return 0, 0, 0, 0
        counters = self.source.counters
        return counters.requests, counters.bytes, counters.retries, counters.refetches

    def close(self) -> None:
        if self._readahead is not None:
            self._readahead.close()
        if self.source is not None:
            self.source.close()
        if self._annotations is not None:
            self._annotations.close()
        if self._metadata is not None:
            self._metadata.close()
        self.fallback.close()


#: Every live holder, so that a forked child can give each a fresh lock.
_HOLDERS: weakref.WeakSet[PerProcess] = weakref.WeakSet()


def _fresh_locks_after_fork() -> None:
    # A thread of the parent may have held a holder's lock (opening its
    # dataset) at the instant of the fork; that thread does not exist in the
    # child, so the copy of its lock would never be released.
    for holder in list(_HOLDERS):
        holder._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fresh_locks_after_fork)


class PerProcess:
    """A reader's `ProcessState` in the process using it, opened there on first use.

    A forked child finds its parent's state and opens its own; a pickle
    carries none of it (the reader pickles what travels, `pickled_state`).
    """

    def __init__(self) -> None:
        self._state: ProcessState | None = None
        self._lock = threading.Lock()
        _HOLDERS.add(self)

    def get(self, open_state: Callable[[], ProcessState]) -> ProcessState:
        """This process's state, opened by `open_state` if this process has none yet."""
        state = self._state
        if state is None or state.pid != os.getpid():
            with self._lock:
                state = self._state
                if state is None or state.pid != os.getpid():
                    state = self._state = open_state()
        return state

    def opened(self, *, inherited: bool = False) -> ProcessState | None:
        """This process's state if open (never opening it); with `inherited`, a forked parent's too."""
        state = self._state
        if state is None or (state.pid != os.getpid() and not inherited):
            return None
        return state

    def close(self) -> None:
        """Close this process's state; a later `get` opens another."""
        with self._lock:
            state, self._state = self._state, None
        if state is not None and state.pid == os.getpid():
            state.close()

    def __reduce__(self) -> tuple[type[PerProcess], tuple[()]]:
        return (PerProcess, ())
