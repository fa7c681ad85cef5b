"""The `BatchReader` each Ray worker process reads its tasks with, opened there.

A read task carries the reader's options, never a reader: an open reader
holds descriptors, mappings and connections that mean nothing in another
process. Ray runs many tasks in one worker process one after another, and
opening a dataset reads its control documents (several round trips in object
storage), so the first task of a dataset in a process opens its reader and
later ones reuse it, as a persistent DataLoader worker does. The store's
credentials are resolved in the worker, from its own environment and
signal_dataset's registry, as a DataLoader worker resolves them.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sds_loader.annotations import Annotations
from sds_loader.augment.chain import Chain
from sds_loader.checksums import VerifyChecksums
from sds_loader.reader import BatchReader
from sds_loader.windows import Window

#: Readers kept per process: a worker reading several datasets in turn keeps the last few open.
_KEPT = 4


@dataclass(frozen=True)
class ReaderOptions:
    """What a worker needs to open the driver's reader again; pickles with the task."""

    uri: str
    fields: tuple[str, ...] | None
    targets: tuple[str, ...]
    window: Window | None
    annotations: tuple[Annotations, ...]
    extras: tuple[str, ...]
    labels: Mapping[str, Sequence[str]] | None
    #: The store's settings (`sds_loader.storage.stores.portable`), or None for the registry's.
    object_store: Any
    verify_checksums: VerifyChecksums
    threads: int
    requests_in_flight: int | None
    #: Names this dataset among those a worker reads: unique per `read_sds` call.
    token: str
    #: The augmentation chain (its seed set), or None.
    augment: Chain | None = None

    def open(self) -> BatchReader:
        return BatchReader(
            self.uri,
            fields=self.fields,
            targets=self.targets,
            window=self.window,
            annotations=self.annotations,
            extras=self.extras,
            labels=self.labels,
            object_store=self.object_store,
            verify_checksums=self.verify_checksums,
            threads=self.threads,
            requests_in_flight=self.requests_in_flight,
            augment=self.augment,
        )


_lock = threading.Lock()
_readers: OrderedDict[str, tuple[int, BatchReader]] = OrderedDict()


def reader_for(options: ReaderOptions) -> BatchReader:
    """This process's reader for `options`, opened on its first task."""
    pid = os.getpid()
    with _lock:
        kept = _readers.get(options.token)
        if kept is not None and kept[0] == pid:
            _readers.move_to_end(options.token)
            return kept[1]
    reader = options.open()
    closed: list[BatchReader] = []
    with _lock:
        _readers[options.token] = (pid, reader)
        while len(_readers) > _KEPT:
            _, (owner, old) = _readers.popitem(last=False)
            if owner == pid:
                closed.append(old)
    for old in closed:
        old.close()
    return reader
