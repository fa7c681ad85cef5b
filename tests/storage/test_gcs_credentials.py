"""A gs:// store whose client carries its own credentials is read as that client, not as the environment."""

from __future__ import annotations

import pytest
import signal_dataset as sds
from gcs_server import ErrorStore

from sds_loader.storage import sources


class _Opened:
    """What `sources.for_shards` asks of an opened dataset: its store."""

    def __init__(self, store: object) -> None:
        self.object_store = store


def test_a_store_whose_client_has_its_own_credentials_signs_with_them(monkeypatch):
    import google.auth
    from google.cloud import storage
    from google.oauth2.credentials import Credentials
    from signal_dataset.storage import GCSObjectStore

    def environment(scopes=None, **_):
        raise AssertionError("the environment's credentials were asked for")

    monkeypatch.setattr(google.auth, "default", environment)
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    server = ErrorStore(403, "forbidden")
    try:
        own = Credentials(token="ya29.the-clients-own-token")
        client = storage.Client(project="p", credentials=own, client_options={"api_endpoint": server.url})
        store = GCSObjectStore(client)
        source = sources.for_shards(_Opened(store), ["gs://b/o"])  # type: ignore[arg-type]
        assert source is not None
        with pytest.raises(sds.StorageError, match="refused to read gs://b/o"):
            source.size(0)
        assert server.authorization == "Bearer ya29.the-clients-own-token"
    finally:
        server.close()
