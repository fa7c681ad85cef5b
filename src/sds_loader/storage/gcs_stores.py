"""signal_dataset's GCS store made safe for each process, as `stores` does for S3's.

A `GCSObjectStore` holds a google-cloud-storage client, and with it a
pooled HTTP session: a forked child (a DataLoader worker) that used it would
write requests into its parent's connections. A forked child therefore gets
a twin store: a new client with the same project, endpoint and credentials
object, and connections of its own.

Crossing to another interpreter (a spawned worker, a Ray task, the
fallback's helper) takes a pickle, and credentials never go into one. On the
other side signal_dataset's registry builds a store with
`google.auth.default()` at the environment's endpoint, so a store crosses
(as nothing: the other side builds the same) only if that is the store it
is: its endpoint the environment's and its credentials the environment's
(or none, at an emulator). A store whose client carries credentials or an
endpoint of its own cannot cross, and `refusal` says so and how to fix it,
rather than the other side reading silently as someone else, elsewhere.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

from signal_dataset.storage import GCSObjectStore

from sds_loader.storage.gcs_source import READ_ONLY_SCOPE, credentials_of, options_of

#: The process each store was first seen in, and the store a forked child uses in its place.
_HOME: weakref.WeakKeyDictionary[GCSObjectStore, int] = weakref.WeakKeyDictionary()
_CHILD_STORES: weakref.WeakKeyDictionary[GCSObjectStore, GCSObjectStore] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()
#: What google.auth.default() found in this process: (credentials or None,), once asked.
_ENVIRONMENT: list[Any] = []

#: The attributes that say whom google-auth credentials act as (never logged, never pickled).
_PRINCIPAL = ("service_account_email", "client_id", "refresh_token", "_target_principal", "_audience")


def _forget_parent() -> None:
    global _LOCK
    _LOCK = threading.Lock()
    _CHILD_STORES.clear()
    _ENVIRONMENT.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_parent)


def is_google_client(store: GCSObjectStore) -> bool:
    """Whether `store` holds a google-cloud-storage client (anything else is the user's own kind)."""
    client = getattr(store, "_client", None)
    return isinstance(getattr(client, "api_endpoint", None), str) and hasattr(client, "_credentials")


def for_this_process(store: GCSObjectStore) -> GCSObjectStore:
    """`store`, or in a forked child a twin of it with connections of its own."""
    with _LOCK:
        home = _HOME.setdefault(store, os.getpid())
        if home == os.getpid():
            return store
        found = _CHILD_STORES.get(store)
    if found is not None or not is_google_client(store):
        return store if found is None else found
    made = twin(store)
    with _LOCK:
        return _CHILD_STORES.setdefault(store, made)


def twin(store: GCSObjectStore) -> GCSObjectStore:
    """A store with a new client: `store`'s project, endpoint and credentials, its own connections."""
    client: Any = getattr(store, "_client")
    # The client's own class (google-cloud-storage's Client, or the user's subclass of it).
    made = type(client)(
        project=client.project,
        credentials=client._credentials,
        client_options={"api_endpoint": client.api_endpoint},
    )
    precondition = getattr(store, "_precondition_failed", None) or None
    api_error = getattr(store, "_api_error", None) or None
    return GCSObjectStore(made, precondition_failed=precondition, api_error=api_error)


def rebuilds_alike(store: GCSObjectStore) -> bool:
    """Whether the store another process's registry builds is `store`: same endpoint, same identity."""
    mine, environment = options_of(store), options_of(None)
    if mine.endpoint != environment.endpoint:
        return False
    credentials = credentials_of(store)
    if credentials is None:
        return mine.anonymous == environment.anonymous
    found = _environment_credentials()
    return found is not None and _principal(found) == _principal(credentials)


def refusal(store: GCSObjectStore) -> str:
    """Why `store` cannot go to another process, and what to do instead."""
    own = "credentials" if credentials_of(store) is not None else "an endpoint"
    return (
        f"this dataset's GCSObjectStore wraps a client with {own} of its own (endpoint "
        f"{options_of(store).endpoint}), which cannot be sent to another process, where "
        "google.auth.default() at the environment's endpoint would read instead; start DataLoader "
        "workers with fork (the default on Linux), or give every process the same identity through "
        "the environment (GOOGLE_APPLICATION_CREDENTIALS, STORAGE_EMULATOR_HOST) and open the dataset "
        "without object_store="
    )


def _environment_credentials() -> Any:
    if not _ENVIRONMENT:
        import google.auth
        from google.auth.exceptions import DefaultCredentialsError

        try:
            found, _ = google.auth.default(scopes=[READ_ONLY_SCOPE])
        except DefaultCredentialsError:
            found = None
        _ENVIRONMENT.append(found)
    return _ENVIRONMENT[0]


def _principal(credentials: Any) -> tuple[object, ...]:
    kind = type(credentials)
    return (kind.__module__, kind.__qualname__, *(getattr(credentials, name, None) for name in _PRINCIPAL))
