"""A Python shard source over local files, recording every fetch: the core's source interface, observed."""

from __future__ import annotations

import os
import threading

import signal_dataset as sds


class FileRangeSource:
    """Shard bytes from local files through Python's own file IO."""

    def __init__(self, paths: list[str], fail_on: int | None = None) -> None:
        self.paths = paths
        self.fail_on = fail_on
        self.calls: list[list[tuple[int, int, int]]] = []
        self.threads: set[int] = set()
        self.kept: list[memoryview] = []

    def size(self, file: int) -> int:
        return os.path.getsize(self.paths[file])

    def name(self, file: int) -> str:
        return "file-range://" + self.paths[file]

    def fetch(self, requests: list[tuple[int, int, memoryview]]) -> None:
        self.calls.append([(file, offset, len(view)) for file, offset, view in requests])
        self.threads.add(threading.get_ident())
        for file, offset, view in requests:
            if file == self.fail_on:
                raise sds.StorageError(f"{self.name(file)}: the store refused the read")
            self.kept.append(view)
            with open(self.paths[file], "rb") as handle:
                handle.seek(offset)
                if handle.readinto(view) != len(view):
                    raise sds.StorageError(f"{self.name(file)}: short read at {offset}")
