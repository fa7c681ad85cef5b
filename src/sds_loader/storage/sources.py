"""Where the native core reads a dataset's shards from: local files or object storage.

signal_dataset resolves every shard to a URI (`read_instructions`); this module
only decides, from those URIs and the store the dataset was opened with, which
byte source the native core gets. Local paths need none (the core maps them,
or reads them with `preadv` when they are not in the page cache). `s3://`
shards get an `S3RangeSource` that sends its requests where the client of the
dataset's own S3 store sends them, signed with that client's credentials
(attempts from the store's settings), so a dataset reads from the same place,
as the same identity, as `signal_dataset.open` would; a store whose client is
no boto3 client stays with signal_dataset's reader. `gs://` shards get a
`GcsRangeSource` with the endpoint of signal_dataset's own GCS store (its
google-cloud-storage client's, which honours
`STORAGE_EMULATOR_HOST`) and google-auth's credentials, when google-auth is
installed. Anything else stays with signal_dataset's reader, and the reason
says why.
"""

from __future__ import annotations

import importlib.util
import weakref
from collections.abc import Sequence

import signal_dataset as sds
from signal_dataset.storage import GCSObjectStore, S3ObjectStore

from sds_loader.storage.cache_settings import CacheSettings
from sds_loader.storage.gcs_source import GcsRangeSource, credentials_of, options_of
from sds_loader.storage.native_range import DEFAULT_REQUESTS_IN_FLIGHT, NativeRangeSource
from sds_loader.storage.s3_client import identity_of
from sds_loader.storage.s3_source import S3RangeSource
from sds_loader.storage.timeouts import Timeouts


def _scheme(uri: str) -> str:
    scheme, separator, _ = uri.partition("://")
    return scheme if separator and scheme != "file" else ""


def is_remote(uri: str) -> bool:
    """Whether `uri` names object storage (or anything else not a local path)."""
    return _scheme(uri) != ""


def _schemes(uris: Sequence[str]) -> set[str]:
    # Names kept compactly (shard_names.ShardNames) all begin with one prefix.
    if getattr(uris, "compact", False):
        return {_scheme(str(getattr(uris, "prefix")))} if len(uris) else set()
    return {_scheme(uri) for uri in uris}


def unavailable_reason(dataset: sds.Dataset, uris: Sequence[str]) -> str | None:
    """Why the native core cannot fetch these shards of `dataset`, or None if it can."""
    schemes = _schemes(uris) or {_scheme(dataset.root)}
    if schemes == {""}:
        return None
    if schemes == {"s3"}:
        if isinstance(dataset.object_store, S3ObjectStore):
            client = getattr(dataset.object_store, "_client", None)
            if identity_of(client) is None:
                return (
                    f"the dataset's S3ObjectStore holds a {type(client).__name__}, not a boto3 client, so "
                    "where it sends requests and as whom is unknown to the native reader"
                )
            return None
        return (
            f"the dataset's store is a {type(dataset.object_store).__name__}, not signal_dataset's "
            "S3ObjectStore, so its settings are unknown to the native reader"
        )
    if schemes == {"gs"}:
        if not isinstance(dataset.object_store, GCSObjectStore):
            return (
                f"the dataset's store is a {type(dataset.object_store).__name__}, not signal_dataset's "
                "GCSObjectStore, so its settings are unknown to the native reader"
            )
        if importlib.util.find_spec("google.auth") is None:
            return (
                "gs:// shards are read natively with google-auth's credentials, and google-auth is not "
                "installed (pip install 'sds-loader[gcs]')"
            )
        return None
    if len(schemes) > 1:
        return f"its shards live in several stores ({', '.join(sorted(s or 'local' for s in schemes))})"
    (scheme,) = schemes
    return (
        f"{scheme}:// shards are read by signal_dataset; the native reader fetches local, s3:// and gs:// "
        "shards"
    )


#: The node cache of each dataset opened with one (BatchReader's cache_dir):
#: every source made for its shards, records', metadata's and annotation
#: sets' alike, caches through it.
_CACHES: weakref.WeakKeyDictionary[sds.Dataset, CacheSettings] = weakref.WeakKeyDictionary()


def use_cache(dataset: sds.Dataset, cache: CacheSettings | None) -> None:
    """Make every source later made for `dataset`'s shards write to and read from `cache`."""
    if cache is None:
        _CACHES.pop(dataset, None)
    else:
        _CACHES[dataset] = cache


def cache_of(dataset: sds.Dataset) -> CacheSettings | None:
    """The node cache `use_cache` gave `dataset`, if any."""
    return _CACHES.get(dataset)


def for_shards(
    dataset: sds.Dataset,
    uris: Sequence[str],
    *,
    requests_in_flight: int | None = None,
    cache: CacheSettings | None = None,
    timeouts: Timeouts | None = None,
) -> NativeRangeSource | None:
    """The byte source for `uris` (None: local files); call only when `unavailable_reason` is None.

    `cache`: the node cache the source writes what it fetches to (by
    default the one `use_cache` gave the dataset; local shards need none:
    they are on this machine's disk already). `timeouts`: the connect and
    read timeouts asked for (by default 10 s and 30 s). Each shard's opening
    is checked before it is kept, as only a source of shards can.
    """
    if _schemes(uris) <= {""}:
        return None
    store = dataset.object_store
    if cache is None:
        cache = _CACHES.get(dataset)
    in_flight = DEFAULT_REQUESTS_IN_FLIGHT if requests_in_flight is None else requests_in_flight
    chosen = Timeouts() if timeouts is None else timeouts
    if isinstance(store, GCSObjectStore):
        return GcsRangeSource(
            uris,
            options_of(store),
            credentials=credentials_of(store),
            requests_in_flight=in_flight,
            cache=cache,
            connect_timeout=chosen.connect,
            read_timeout=chosen.read,
            check_openings=True,
        )
    assert isinstance(store, S3ObjectStore)
    client = identity_of(getattr(store, "_client", None))
    return S3RangeSource(
        uris,
        store.options,
        client=client,
        requests_in_flight=in_flight,
        cache=cache,
        connect_timeout=chosen.connect,
        read_timeout=chosen.read,
        check_openings=True,
    )
