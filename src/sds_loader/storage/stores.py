"""The object store a dataset is opened with, used as it was given, and made safe for each process.

A store the caller passes is the store the dataset is read through: its
control documents go through that store object, and the native source sends
its ranged GETs to that store's endpoint with that store's credentials
(storage/s3_client.py). The environment's endpoint and credential chain are
used only where no store was passed.

signal_dataset's S3 store holds a boto3 client, whose pooled sockets a forked
child would share with its parent: two processes writing requests into one
connection read each other's answers. A forked child therefore gets a store
of its own that talks to the same endpoint as the same identity: one built
from the same `S3Options` when the store's client is what those options build
(the same endpoint and access key as the environment resolves), otherwise a
twin of the client (same endpoint, region, configuration, and its credentials
as they were at the fork). Other stores are passed on unchanged: the local
store holds no connections, and any other kind is the user's to make
fork-safe. GCS stores follow the same rules (storage/gcs_stores.py): a twin
with connections of its own in a forked child, and no crossing with an
identity of their own.

Crossing to another interpreter (a spawned worker, the fallback's helper)
takes a pickle, and credentials never go into one: a store that options
rebuild alike crosses as its options; a store around a client with an
endpoint or keys of its own cannot cross, and `portable` says so and how to
fix it, rather than letting the other side read with the environment's
identity.

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
import weakref

from signal_dataset.storage import GCSObjectStore, ObjectStore, S3ObjectStore, S3Options, default_registry
from signal_dataset.storage.paths import s3_parts

from sds_loader.storage import gcs_stores
from sds_loader.storage.s3_client import access_key_of, identity_of, twin_client
from sds_loader.storage.s3_source import endpoint_of, environment_credentials, region_of

#: This process's S3 stores by their settings, and by (registry backend, bucket)
#: for roots opened without a store.
_BY_OPTIONS: dict[S3Options, S3ObjectStore] = {}
_BY_BACKEND: dict[tuple[object, str], S3ObjectStore] = {}
_LOCK = threading.Lock()

#: The process each store a caller passed was first seen in, and the store a
#: forked child uses in its place.
_HOME: weakref.WeakKeyDictionary[S3ObjectStore, int] = weakref.WeakKeyDictionary()
_CHILD_STORES: weakref.WeakKeyDictionary[S3ObjectStore, S3ObjectStore] = weakref.WeakKeyDictionary()


def _forget_parent_stores() -> None:
    global _LOCK
    # The parent's clients hold its sockets; a parent thread may have held the lock.
    _LOCK = threading.Lock()
    _BY_OPTIONS.clear()
    _BY_BACKEND.clear()
    _CHILD_STORES.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_parent_stores)


def for_this_process(store: ObjectStore | S3Options | None) -> ObjectStore | None:
    """`store` as given, or in a forked child a store of its own with the same endpoint and identity.

    Takes what `portable` made of a store, too.
    """
    if isinstance(store, S3Options):
        return _with_options(store)
    if type(store) is GCSObjectStore:
        return gcs_stores.for_this_process(store)  # the same rule for GCS's pooled sessions
    if type(store) is not S3ObjectStore:
        return store
    with _LOCK:
        home = _HOME.setdefault(store, os.getpid())
        if home == os.getpid():
            return store
        found = _CHILD_STORES.get(store)
    if found is not None:
        return found
    made = _with_options(store.options) if rebuilds_alike(store) else _twin(store)
    with _LOCK:
        return _CHILD_STORES.setdefault(store, made)


def rebuilds_alike(store: S3ObjectStore) -> bool:
    """Whether a store built from `store.options` talks to the same endpoint as the same identity.

    True for a store signal_dataset built from its options (its client is
    what they build); False for a client with an endpoint or keys of its own.
    """
    identity = identity_of(getattr(store, "_client", None))
    if identity is None:
        return False
    options = store.options
    if identity.endpoint_url.rstrip("/") != endpoint_of(options, region_of(options)).rstrip("/"):
        return False
    return access_key_of(identity.credentials) == access_key_of(environment_credentials(options))


def _twin(store: S3ObjectStore) -> S3ObjectStore:
    client = getattr(store, "_client", None)
    identity = identity_of(client)
    if identity is None:
        return store  # not a boto3 client: the user's to make fork-safe
    return S3ObjectStore(twin_client(client, identity), options=store.options)


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

    Raises `ValueError` for an S3 store around a client of the caller's own
    (an endpoint or keys the environment does not give): its credentials do
    not go into a pickle, and the other side must not read as someone else.
    """
    if type(store) is S3ObjectStore:
        if rebuilds_alike(store):
            return store.options
        identity = identity_of(getattr(store, "_client", None))
        where = f" (endpoint {identity.endpoint_url})" if identity is not None else ""
        raise ValueError(
            f"this dataset's S3ObjectStore wraps a client of its own{where}, whose credentials "
            "cannot be sent to another process; start DataLoader workers with fork (the default on "
            "Linux), or describe the store with S3Options and the environment's credentials "
            "(signal_dataset.storage.default_registry().register(s3_backend(options))) so that "
            "every process builds the same one"
        )
    if type(store) is GCSObjectStore and gcs_stores.is_google_client(store):
        if gcs_stores.rebuilds_alike(store):
            return None  # the other side's registry builds this same store
        raise ValueError(gcs_stores.refusal(store))
    try:
        pickle.dumps(store)
    except Exception:  # noqa: BLE001 - whatever stops pickling, the answer is the same
        return None
    return store
