"""Byte ranges of shards in S3, fetched natively, for the native core.

`S3RangeSource` is the Python side of the native core's fetch seam for
object storage. The requests themselves are issued and received by the
extension (`_native.ObjectStoreSource`, libcurl's multi interface with its own SigV4
signing): many in flight from one thread, no Python and no GIL per request,
so a batch's ranged GETs cost tens of microseconds of CPU each rather than
the milliseconds a Python client spends signing and parsing. The core plans
which ranges a batch needs (footers once per shard, adjacent chunks as one
range), and the native source fills its buffers in place.

What stays in Python is what signal_dataset and boto3 already know, so that
a dataset reads from the same place, with the same identity, as
`signal_dataset.open` would:

- where each object lives: endpoint, region and addressing style come from
  the boto3 client of the dataset's store (storage/s3_client.py), turned into
  one URL per shard here; without one, from signal_dataset's `S3Options` and
  the environment;
- who is asking: the store's client's credentials (a client with keys or a
  session of its own signs as itself), else boto3's standard chain
  (environment, profile, container or instance role), resolved in this
  process and handed to the native source again before they expire.

What the native source guarantees, and what every store's source shares,
is in storage/native_range.py.
"""

from __future__ import annotations

import ipaddress
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from signal_dataset.storage.backends.s3 import S3Options
from signal_dataset.storage.paths import s3_parts

from sds_loader.storage.cache_settings import CacheSettings
from sds_loader.storage.native_range import (
    CREDENTIALS_CHECK_SECONDS,
    DEFAULT_REQUESTS_IN_FLIGHT,
    HEAD_BYTES,
    PART_BYTES,
    READAHEAD_BYTES,
    TAIL_BYTES,
    FetchCounters,
    NativeRangeSource,
    native_settings,
)
from sds_loader.storage.s3_client import ClientIdentity

if TYPE_CHECKING:
    import boto3

    from sds_loader import _native

__all__ = [
    "CREDENTIALS_CHECK_SECONDS",
    "DEFAULT_REQUESTS_IN_FLIGHT",
    "HEAD_BYTES",
    "PART_BYTES",
    "READAHEAD_BYTES",
    "TAIL_BYTES",
    "FetchCounters",
    "S3RangeSource",
    "endpoint_of",
    "object_url",
    "region_of",
]


#: boto3 sessions of this process, by profile. A session resolves the
#: credential chain once and refreshes what expires; making one per reader
#: would read the configuration files again each time.
_SESSIONS: dict[str | None, boto3.Session] = {}
_SESSIONS_LOCK = threading.Lock()


def _forget_parent_state() -> None:
    global _SESSIONS_LOCK
    # A parent thread may have held this lock, or a credential refresh lock, at the fork.
    _SESSIONS_LOCK = threading.Lock()
    _SESSIONS.clear()
    _ENDPOINTS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_parent_state)


def _session(profile: str | None) -> boto3.Session:
    import boto3

    with _SESSIONS_LOCK:
        session = _SESSIONS.get(profile)
        if session is None:
            session = _SESSIONS[profile] = boto3.Session(profile_name=profile)
        return session


def environment_credentials(options: S3Options) -> Any:
    """The credentials boto3's chain gives for `options`' profile (None: none found)."""
    return _session(options.profile_name).get_credentials()


def region_of(options: S3Options) -> str:
    """The region requests are signed for: the settings', else the profile's or environment's."""
    if options.region_name:
        return options.region_name
    return _session(options.profile_name).region_name or "us-east-1"


#: The endpoint boto3 resolves by itself, by (profile, region).
_ENDPOINTS: dict[tuple[str | None, str], str] = {}


def endpoint_of(options: S3Options, region: str) -> str:
    """The endpoint requests go to: the settings', else the one boto3 resolves.

    boto3 also takes an endpoint from `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`
    and the profile's configuration, so its own client is asked (once per
    process, profile and region) rather than this module guessing AWS's.
    """
    if options.endpoint_url:
        return options.endpoint_url
    key = (options.profile_name, region)
    found = _ENDPOINTS.get(key)
    if found is None:
        client = _session(options.profile_name).client("s3", region_name=region)
        found = _ENDPOINTS[key] = str(client.meta.endpoint_url)
    return found


def object_url(options: S3Options, region: str, bucket: str, key: str) -> str:
    """The URL of `bucket`/`key`, addressed as boto3 would with these settings."""
    return address(endpoint_of(options, region), options.addressing_style or "auto", bucket, key)


def address(endpoint: str, style: str, bucket: str, key: str) -> str:
    """The URL of `bucket`/`key` at `endpoint`, in addressing `style` ("path", "virtual", "auto").

    Path style (`endpoint/bucket/key`) when asked for, when the endpoint is
    an IP address or localhost, or when the bucket name cannot be a host
    name; otherwise virtual-hosted style (`bucket.host/key`).
    """
    endpoint = endpoint.rstrip("/")
    parts = urlsplit(endpoint)
    host = parts.hostname or ""
    path_key = quote(key, safe="/-_.~")
    if style == "auto":
        try:
            ipaddress.ip_address(host)
            by_ip = True
        except ValueError:
            by_ip = host == "localhost"
        dns_safe = (
            bucket == bucket.lower() and "_" not in bucket and not (parts.scheme == "https" and "." in bucket)
        )
        style = "path" if by_ip or not dns_safe else "virtual"
    if style == "path":
        return f"{endpoint}/{quote(bucket, safe='')}/{path_key}"
    netloc = f"{bucket}.{parts.netloc}"
    base_path = parts.path.rstrip("/")
    return f"{parts.scheme}://{netloc}{base_path}/{path_key}"


class S3RangeSource(NativeRangeSource):
    """Shard byte ranges from S3 (or any S3-compatible store) for the native core.

    `uris` are the shard objects in the core's file numbering. `options` are
    signal_dataset's own S3 settings (endpoint, region, profile, addressing
    style, `max_attempts`), normally those of the store the dataset was opened
    with. `client` is the identity of that store's boto3 client: its endpoint,
    region, addressing style and credentials are used instead of those the
    options and the environment resolve. `requests_in_flight` bounds
    concurrent GETs per read.
    `backoff_seconds`/`backoff_max_seconds` shape the retry schedule;
    `connect_timeout` bounds a connection's setup and `read_timeout` how long
    an answer may stay silent (`BatchReader` takes both). `check_openings`:
    the objects are ArrayRecord shards, whose openings (footers) are kept
    only once they verify, and fetched again when they fail (`for_shards`
    sets it; a source of other objects keeps their bytes as they come).
    """

    def __init__(
        self,
        uris: Sequence[str],
        options: S3Options | None = None,
        *,
        client: ClientIdentity | None = None,
        requests_in_flight: int = DEFAULT_REQUESTS_IN_FLIGHT,
        backoff_seconds: float = 0.1,
        backoff_max_seconds: float = 5.0,
        connect_timeout: float = 10.0,
        read_timeout: float = 30.0,
        readahead_bytes: int = READAHEAD_BYTES,
        cache: CacheSettings | None = None,
        check_openings: bool = False,
    ) -> None:
        self._options = S3Options() if options is None else options
        self._client = client
        super().__init__(
            uris,
            native_settings(
                max_attempts=self._options.max_attempts,
                requests_in_flight=requests_in_flight,
                backoff_seconds=backoff_seconds,
                backoff_max_seconds=backoff_max_seconds,
                connect_timeout=connect_timeout,
                read_timeout=read_timeout,
                readahead_bytes=readahead_bytes,
                check_openings=check_openings,
            ),
            cache,
        )
        self._region: str | None = None

    def _make_native(self) -> _native.ObjectStoreSource:
        from sds_loader import _native

        region = self._signing_region()
        urls = []
        for uri in self._uris:
            bucket, key = s3_parts(uri)
            if self._client is not None:
                urls.append(address(self._client.endpoint_url, self._client.addressing_style, bucket, key))
            else:
                urls.append(object_url(self._options, region, bucket, key))
        return _native.ObjectStoreSource(
            list(self._uris), urls, **self._settings, **self._cache_arguments(), store="s3"
        )

    def _signing_region(self) -> str:
        """The region requests are signed for, resolved once per source."""
        if self._region is None:
            self._region = self._client.region if self._client is not None else region_of(self._options)
        return self._region

    def _hand_credentials(self, native: _native.ObjectStoreSource) -> None:
        """Give `native` the chain's current credentials (unsigned requests when there are none)."""
        if self._credentials is None:
            self._credentials = (
                self._client.credentials
                if self._client is not None
                else environment_credentials(self._options)
            )
        credentials: Any = self._credentials
        region = self._signing_region()
        if credentials is None:
            native.set_credentials(region, "", "", "")
            return
        # Refreshes credentials that are about to expire, as boto3's own clients do.
        frozen = credentials.get_frozen_credentials()
        native.set_credentials(region, frozen.access_key, frozen.secret_key, frozen.token or "")
