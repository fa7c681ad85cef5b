"""Byte ranges of shards in Google Cloud Storage, fetched natively, for the native core.

The same native source as S3's (storage/native_range.py: libcurl's multi
interface, retries, tails, readahead), with Google Cloud Storage's rules:
each `gs://bucket/key` shard is read from the JSON API's media endpoint,
`{endpoint}/download/storage/v1/b/{bucket}/o/{key, URL-encoded}?alt=media`,
which real GCS and its emulators serve with ranged reads; an object's version
is its generation, and ranged GETs after a shard's first carry
`ifGenerationMatch`.

What stays in Python is what signal_dataset and google-auth already know:

- where each object lives: the endpoint of the google-cloud-storage client
  signal_dataset's `GCSObjectStore` was made with, which honours
  `STORAGE_EMULATOR_HOST` and `client_options`; without one,
  `STORAGE_EMULATOR_HOST` when set, else `https://storage.googleapis.com`;
- who is asking: the credentials of that client when it carries its own (a
  client made with `credentials=`), else an OAuth 2 access token from
  `google.auth.default()` (read-only scope); either is refreshed in this
  process before it expires and handed to the native source as an
  `Authorization: Bearer` header, so a store's own identity is never swapped
  for the environment's. Requests go anonymous when an emulator is used (as
  the client does) or when no credentials are found; a refusal then says so.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import signal_dataset as sds
from signal_dataset.storage.paths import gcs_parts

from sds_loader.storage.cache_settings import CacheSettings
from sds_loader.storage.native_range import (
    DEFAULT_REQUESTS_IN_FLIGHT,
    READAHEAD_BYTES,
    NativeRangeSource,
    native_settings,
)

if TYPE_CHECKING:
    from sds_loader import _native

#: Where requests go when neither the store nor the environment says otherwise.
DEFAULT_ENDPOINT = "https://storage.googleapis.com"

#: The scope the access token is asked for: shards are only read.
READ_ONLY_SCOPE = "https://www.googleapis.com/auth/devstorage.read_only"

#: Where google-cloud-storage finds an emulator (a URL, scheme included).
EMULATOR_VARIABLE = "STORAGE_EMULATOR_HOST"


@dataclass(frozen=True)
class GcsOptions:
    """Where a dataset's objects live and whether requests carry a token.

    `endpoint`: the scheme and host (and any base path) of the JSON API.
    `anonymous`: send no token (an emulator's requests, or a public bucket).
    `max_attempts`: attempts per range before a read fails.
    """

    endpoint: str = DEFAULT_ENDPOINT
    anonymous: bool = False
    max_attempts: int = 5


def _emulator() -> str | None:
    host = os.environ.get(EMULATOR_VARIABLE, "").strip()
    if not host:
        return None
    return host if "://" in host else f"http://{host}"


def options_of(store: object | None = None) -> GcsOptions:
    """The settings of signal_dataset's `GCSObjectStore` `store` (or the environment's, without one).

    The store keeps the google-cloud-storage client it reads control
    documents with: its endpoint is where the shards are read from too, and
    a client without a token (an emulator's) means anonymous requests here.
    """
    client = getattr(store, "_client", None)
    endpoint = getattr(client, "api_endpoint", None)
    if isinstance(endpoint, str) and endpoint:
        from google.auth.credentials import AnonymousCredentials

        anonymous = isinstance(getattr(client, "_credentials", None), AnonymousCredentials)
        return GcsOptions(endpoint=endpoint.rstrip("/"), anonymous=anonymous or _emulator() is not None)
    emulator = _emulator()
    if emulator is not None:
        return GcsOptions(endpoint=emulator.rstrip("/"), anonymous=True)
    return GcsOptions()


def credentials_of(store: object | None) -> Any:
    """The google-auth credentials the store's client signs with, or None (the environment's are used).

    Anonymous credentials (an emulator's client) count as none: `options_of`
    already makes such requests anonymous.
    """
    credentials = getattr(getattr(store, "_client", None), "_credentials", None)
    if credentials is None or not hasattr(credentials, "token") or not hasattr(credentials, "valid"):
        return None
    from google.auth.credentials import AnonymousCredentials

    return None if isinstance(credentials, AnonymousCredentials) else credentials


def object_url(endpoint: str, bucket: str, key: str) -> str:
    """The JSON API media URL of `bucket`/`key` at `endpoint`."""
    return (
        f"{endpoint.rstrip('/')}/download/storage/v1/b/{quote(bucket, safe='')}/o/{quote(key, safe='')}"
        "?alt=media"
    )


class GcsRangeSource(NativeRangeSource):
    """Shard byte ranges from Google Cloud Storage (or an emulator) for the native core.

    `uris` are the `gs://` shard objects in the core's file numbering;
    `options` say where they live and whether requests carry a token
    (`options_of(dataset.object_store)` gives those of the dataset's store);
    `credentials` (`credentials_of(dataset.object_store)`), when given, are
    what the token comes from instead of `google.auth.default()`. The other
    arguments are as for `S3RangeSource`.
    """

    def __init__(
        self,
        uris: Sequence[str],
        options: GcsOptions | None = None,
        *,
        credentials: Any = None,
        requests_in_flight: int = DEFAULT_REQUESTS_IN_FLIGHT,
        backoff_seconds: float = 0.1,
        backoff_max_seconds: float = 5.0,
        connect_timeout: float = 10.0,
        read_timeout: float = 30.0,
        readahead_bytes: int = READAHEAD_BYTES,
        cache: CacheSettings | None = None,
        check_openings: bool = False,
    ) -> None:
        self._options = options_of() if options is None else options
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
        #: Whether google.auth.default() was asked in this process and found nothing.
        self._none_found = False
        #: The store's own credentials (never pickled: see __getstate__).
        self._given = credentials
        self._credentials = credentials

    @property
    def options(self) -> GcsOptions:
        return self._options

    def _make_native(self) -> _native.ObjectStoreSource:
        from sds_loader import _native

        urls = []
        for uri in self._uris:
            bucket, key = gcs_parts(uri)
            urls.append(object_url(self._options.endpoint, bucket, key))
        return _native.ObjectStoreSource(
            list(self._uris), urls, **self._settings, **self._cache_arguments(), store="gcs"
        )

    def _hand_credentials(self, native: _native.ObjectStoreSource) -> None:
        """Give `native` a valid access token (anonymous requests when there is none to give)."""
        if self._options.anonymous:
            native.set_bearer_token("")
            return
        if self._credentials is None and self._given is not None:
            self._credentials = self._given
        if self._credentials is None and not self._none_found:
            import google.auth
            from google.auth.exceptions import DefaultCredentialsError

            try:
                self._credentials, _ = google.auth.default(scopes=[READ_ONLY_SCOPE])
            except DefaultCredentialsError:
                self._none_found = True
        credentials: Any = self._credentials
        if credentials is None:
            native.set_bearer_token("")
            return
        # `valid` turns False minutes before the token expires (google-auth's
        # refresh threshold), so a token handed on here outlives the next look.
        if not credentials.valid:
            import google.auth.transport.requests
            from google.auth.exceptions import GoogleAuthError

            try:
                credentials.refresh(google.auth.transport.requests.Request())
            except GoogleAuthError as error:
                raise sds.StorageError(
                    f"could not get a Google Cloud Storage access token for {self._uris[0]}: {error}"
                ) from error
        native.set_bearer_token(str(credentials.token or ""))

    def _forget_parent(self) -> None:
        super()._forget_parent()
        self._none_found = False

    def __getstate__(self) -> dict[str, object]:
        if self._given is not None:
            raise ValueError(
                f"the source of {self._uris[0]} signs with the credentials of the store's own client, "
                "which are not sent to another process; use fork, or let google.auth.default() find "
                "the credentials in every process"
            )
        return super().__getstate__()
