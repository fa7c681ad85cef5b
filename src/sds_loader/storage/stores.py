"""The object store a dataset is opened with, made safe for the current process.

signal_dataset's S3 store holds a boto3 client, whose pooled sockets a forked
child would share with its parent: two processes writing requests into one
connection read each other's answers. A child therefore gets a new store with
the same settings (`S3Options`: endpoint, region, profile, addressing style,
retries); the credential chain is boto3's own in every process. Other stores
are passed on unchanged: the local store holds no connections, and a store a
user built around an injected client is the user's to make fork-safe.

S3 stores are also kept, one per settings, for the life of the process.
Building a boto3 client parses S3's service model: about 0.1 s of CPU, more
than a sparse batch from a nearby store costs, paid by every
`signal_dataset.open` of an `s3://` root. A reader made after the first in a
process (one per epoch, say, or a validation reader beside the training one)
reuses the client and its open connections instead. The cost is that a client
outlives the reader that made it, and that credentials are resolved when it
is first built (boto3 refreshes credentials that expire, such as an
instance role's, in place).
"""

from __future__ import annotations

import os
import pickle
import threading

from signal_dataset.storage import ObjectStore, S3ObjectStore, S3Options, default_registry
from signal_dataset.storage.paths import s3_parts

#: This process's S3 stores by their settings, and by (registry backend, bucket)
#: for roots opened without a store.
_BY_OPTIONS: dict[S3Options, S3ObjectStore] = {}
_BY_BACKEND: dict[tuple[object, str], S3ObjectStore] = {}
_LOCK = threading.Lock()


def _forget_parent_stores() -> None:
    global _LOCK
    # The parent's clients hold its sockets; a parent thread may have held the lock.
    _LOCK = threading.Lock()
    _BY_OPTIONS.clear()
    _BY_BACKEND.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_parent_stores)


def for_this_process(store: ObjectStore | S3Options | None) -> ObjectStore | None:
    """`store`, or this process's store with its settings where sharing it across a fork is unsafe.

    Takes what `portable` made of a store, too.
    """
    if type(store) is S3ObjectStore:
        return _with_options(store.options)
    if isinstance(store, S3Options):
        return _with_options(store)
    return store


def for_root(uri: str, store: ObjectStore | S3Options | None) -> ObjectStore | None:
    """The store to open dataset root `uri` with in this process.

    Without `store`, an `s3://` root gets the store signal_dataset's registry
    makes for it, made once per process, registered backend and bucket; any
    other root gets None, and signal_dataset resolves its store itself.
    """
    if store is not None or not uri.startswith("s3://"):
        return for_this_process(store)
    try:
        backend = default_registry().backend_for(uri)
        key = (backend, s3_parts(uri, allow_empty_name=True)[0])
    except ValueError:
        return None  # signal_dataset.open says what is wrong with the root
    with _LOCK:
        found = _BY_BACKEND.get(key)
    if found is not None:
        return found
    made = backend.factory(uri, root_is_directory=True)
    if type(made) is not S3ObjectStore:
        return made  # a store of the user's own kind: theirs to share or not
    with _LOCK:
        return _BY_BACKEND.setdefault(key, made)


def _with_options(options: S3Options) -> S3ObjectStore:
    with _LOCK:
        found = _BY_OPTIONS.get(options)
    if found is not None:
        return found
    made = S3ObjectStore(options=options)  # built outside the lock: it takes a while
    with _LOCK:
        return _BY_OPTIONS.setdefault(options, made)


def portable(store: ObjectStore | None) -> ObjectStore | S3Options | None:
    """What of `store` can cross to another interpreter: an S3 store's settings,
    a store that pickles, or None (the other side resolves one from its registry,
    which is what a local store amounts to).
    """
    if type(store) is S3ObjectStore:
        return store.options
    try:
        pickle.dumps(store)
    except Exception:  # noqa: BLE001 - whatever stops pickling, the answer is the same
        return None
    return store
