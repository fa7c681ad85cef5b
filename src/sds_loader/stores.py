"""The object store a dataset is opened with, made safe for the current process.

signal_dataset's S3 store holds a boto3 client, whose pooled sockets a forked
child would share with its parent: two processes writing requests into one
connection read each other's answers. A child therefore gets a new store with
the same settings (`S3Options`: endpoint, region, profile, addressing style,
retries); the credential chain is boto3's own in every process. Other stores
are passed on unchanged: the local store holds no connections, and a store a
user built around an injected client is the user's to make fork-safe.
"""

from __future__ import annotations

import pickle

from signal_dataset.storage import ObjectStore, S3ObjectStore, S3Options


def for_this_process(store: ObjectStore | S3Options | None) -> ObjectStore | None:
    """`store`, or a fresh store with its settings where sharing it across a fork is unsafe.

    Takes what `portable` made of a store, too.
    """
    if type(store) is S3ObjectStore:
        return S3ObjectStore(options=store.options)
    if isinstance(store, S3Options):
        return S3ObjectStore(options=store)
    return store


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
