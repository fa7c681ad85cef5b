"""One request for each control document while a reader opens a dataset in S3.

signal_dataset reads each JSON control document of a dataset (root,
snapshot, manifests) as ``info`` then ``read``: a HEAD for the size, which
it checks against its limits and the size the parent document recorded,
then a GET. The snapshot and each manifest are also looked up once more
beforehand. Against a store tens of milliseconds away that is nine requests
one after another for a small dataset, about 0.2 s, more than a new
reader's first batch takes once the shards are known.

While a reader opens a dataset, `coalesced(store)` answers those lookups
from one GET per document: the first ``info`` of a ``.json`` object fetches
it whole (with its ETag, through the store's own ``read_version``), later
``info`` calls give that copy's size and ``read`` returns it. signal_dataset
checks the same sizes against the same bytes, which are now one version of
the object rather than a HEAD's and a later GET's. The cost: a control
document is downloaded before signal_dataset can refuse it for its size,
a waste only on a dataset that is refused anyway.

Only for signal_dataset's own S3 store, only on the thread that opens, and
only inside the ``with``: the store is shared by every reader of the
process, and a later ``info`` (an annotation catalog that moved on, say)
must ask the store again.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from signal_dataset.storage import ObjectStore, S3ObjectStore
from signal_dataset.storage.contracts import ObjectInfo

#: What the current thread's opening has fetched: {id(store): {uri: bytes}}.
_OPENING = threading.local()
_INSTALL_LOCK = threading.Lock()
#: Marks a store whose info and read look at the opening first.
_INSTALLED = "_sds_loader_coalesced_control_reads"


@contextlib.contextmanager
def coalesced(store: ObjectStore | None) -> Iterator[None]:
    """Within the block, on this thread, one GET answers each control document's lookups."""
    if type(store) is not S3ObjectStore:
        yield
        return
    _install(store)
    fetched: dict[int, dict[str, bytes]] = getattr(_OPENING, "fetched", None) or {}
    outer = fetched.get(id(store))
    fetched[id(store)] = {} if outer is None else outer
    _OPENING.fetched = fetched
    try:
        yield
    finally:
        if outer is None:
            del fetched[id(store)]


def _documents(store: S3ObjectStore) -> dict[str, bytes] | None:
    fetched: dict[int, dict[str, bytes]] | None = getattr(_OPENING, "fetched", None)
    return None if fetched is None else fetched.get(id(store))


def _install(store: S3ObjectStore) -> None:
    with _INSTALL_LOCK:
        if getattr(store, _INSTALLED, False):
            return

        def info(uri: str, *, generation: int | None = None) -> ObjectInfo:
            documents = _documents(store)
            if documents is None or generation is not None or not uri.endswith(".json"):
                return S3ObjectStore.info(store, uri, generation=generation)
            if uri not in documents:
                documents[uri] = S3ObjectStore.read_version(store, uri).data
            return ObjectInfo(len(documents[uri]))

        def read(uri: str, *, generation: int | None = None) -> bytes:
            documents = _documents(store)
            if documents is not None and generation is None and uri in documents:
                return documents[uri]
            return S3ObjectStore.read(store, uri, generation=generation)

        store.info = info  # type: ignore[method-assign]
        store.read = read  # type: ignore[method-assign]
        setattr(store, _INSTALLED, True)
