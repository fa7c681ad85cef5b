"""A `BatchReader`'s keyword arguments, checked once, in the order they are named.

Every check a reader's arguments get is here, so that the reader itself holds
settings known to be good; each message names the argument and what it
takes, and the first bad argument (in this order) is the one reported.
Checks that need the dataset (field and target names against record 0,
annotation sets that exist) are the reader's, made once it is opened.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from signal_dataset.storage import ObjectStore, S3Options

from sds_loader.annotations import Annotations
from sds_loader.augment.chain import Chain, chain_setting
from sds_loader.checksums import VerifyChecksums, verify_checksums_setting
from sds_loader.extras import annotation_specs, extra_names, given_labels, names
from sds_loader.file_budget import default_open_files
from sds_loader.pickled_state import portable_store
from sds_loader.process_state import ProcessState
from sds_loader.storage.cache_settings import CacheSettings, cache_settings
from sds_loader.storage.timeouts import Timeouts
from sds_loader.windows import Window


def default_threads() -> int:
    return max(1, min(4, os.cpu_count() or 1))


def checked_threads(value: object) -> int:
    """`threads` as given, or ValueError: a positive integer (a bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"threads must be a positive integer, not {value!r}")
    return value


def checked_epoch(value: object) -> int:
    """`epoch` as given, or ValueError: an integer from 0 to 2**64 - 1 (a bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or not 0 <= int(value) < 2**64:
        raise ValueError(f"epoch must be a non-negative integer below 2**64, not {value!r}")
    return int(value)


def _positive_or_none(argument: str, value: object) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{argument} must be a positive integer or None, not {value!r}")
    return value


@dataclass(frozen=True)
class ReaderOptions:
    """What a `BatchReader` was asked for, every argument checked (see `build`)."""

    uri: str
    #: None: every field of the first record read.
    fields: tuple[str, ...] | None
    targets: tuple[str, ...]
    threads: int
    verify: VerifyChecksums
    max_open_files: int
    max_chunk_bytes: int | None
    #: A store, or (once pickled) the settings another process builds it from.
    object_store: ObjectStore | S3Options | None
    window: Window | None
    requests_in_flight: int | None
    #: Object storage's connect and read timeouts.
    timeouts: Timeouts
    annotations: tuple[Annotations, ...]
    extras: tuple[str, ...]
    #: The class names `labels=` gives for targets, by key.
    labels: Mapping[str, tuple[str, ...]]
    cache: CacheSettings | None
    #: The augmentation chain, or None.
    augment: Chain | None = None

    @classmethod
    def build(
        cls,
        uri: str,
        *,
        fields: Sequence[str] | None,
        targets: Sequence[str],
        threads: int | None,
        verify_checksums: VerifyChecksums,
        max_open_files: int | None,
        max_chunk_bytes: int | None,
        object_store: ObjectStore | None,
        window: Window | None,
        requests_in_flight: int | None,
        connect_timeout: float | None = None,
        read_timeout: float | None = None,
        annotations: Sequence[Annotations] = (),
        extras: Sequence[str] = (),
        labels: Mapping[str, Sequence[str]] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        cache_limit: int | str | None = None,
        augment: object = None,
    ) -> ReaderOptions:
        """Check every argument, raising the first bad one's TypeError or ValueError."""
        if not isinstance(uri, str | os.PathLike):
            raise TypeError(f"uri must be a path or URI string, not {type(uri).__name__}")
        chosen_fields = names("fields", fields) if fields is not None else None
        chosen_targets = names("targets", targets)
        chosen_threads = checked_threads(default_threads() if threads is None else threads)
        chunk_bytes = _positive_or_none("max_chunk_bytes", max_chunk_bytes)
        open_files = max_open_files if max_open_files is not None else default_open_files()
        if isinstance(open_files, bool) or not isinstance(open_files, int) or open_files < 1:
            raise ValueError(f"max_open_files must be a positive integer or None, not {open_files!r}")
        if window is not None and not isinstance(window, Window):
            raise TypeError(f"window must be a sds_loader.Window, not {type(window).__name__}")
        verify = verify_checksums_setting(verify_checksums)
        in_flight = _positive_or_none("requests_in_flight", requests_in_flight)
        timeouts = Timeouts.build(connect_timeout, read_timeout)
        cache = cache_settings(cache_dir, cache_limit)
        specs = annotation_specs(annotations)
        extra = extra_names(extras, window)
        chain = chain_setting(augment)
        return cls(
            uri=os.fspath(uri),
            fields=chosen_fields,
            targets=chosen_targets,
            threads=chosen_threads,
            verify=verify,
            max_open_files=open_files,
            max_chunk_bytes=chunk_bytes,
            object_store=object_store,
            window=window,
            requests_in_flight=in_flight,
            timeouts=timeouts,
            annotations=specs,
            extras=extra,
            labels=given_labels(labels, chosen_targets),
            cache=cache,
            augment=chain,
        )

    def portable(self, opened_with: ObjectStore | None) -> ReaderOptions:
        """These options as they cross a pickle: the store given, else the one the dataset was
        opened with (signal_dataset's choice for its URI), as another interpreter rebuilds it."""
        store = self.object_store if self.object_store is not None else opened_with
        return replace(self, object_store=portable_store(store))

    def open_state(self) -> ProcessState:
        """A reader's state in this process, opened with these settings."""
        state = ProcessState(
            self.uri,
            self.object_store,
            self.verify,
            self.max_open_files,
            self.requests_in_flight,
            self.cache,
            self.timeouts,
        )
        if state.native is not None and self.max_chunk_bytes is not None:
            state.native.max_chunk_bytes = self.max_chunk_bytes
        return state
