"""A gs:// store reaches other processes as an S3 store does, against a GCS emulator on 127.0.0.1.

- A store whose client carries credentials, or an endpoint, of its own
  refuses to be pickled (for a spawned worker, a Ray task, the fallback's
  helper) and says why, rather than the other side reading silently with
  `google.auth.default()` at the environment's endpoint; its token is not
  in the message.
- A store the environment describes crosses, and reads the same rows there.
- Forked DataLoader workers get a store with a client, and connections, of
  their own, and read exactly.
"""

from __future__ import annotations

import functools
import json
import os
import pickle
from pathlib import Path

import pytest
import signal_dataset as sds
from native_required import _native  # noqa: F401

import sds_loader

TOKEN = "ya29.the-clients-own-token"


@pytest.fixture
def no_environment_identity(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An environment in which google.auth.default() finds nothing, quickly (no metadata server)."""
    from sds_loader.storage import gcs_stores

    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "no-gcloud"))
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    gcs_stores._ENVIRONMENT.clear()
    yield
    gcs_stores._ENVIRONMENT.clear()


def rows(batch: dict, key: str = "samples") -> list[bytes]:
    return [row.tobytes() for row in batch[key]]


def local_rows(local: str, indices: list[int]) -> list[bytes]:
    dataset = sds.open(local)
    return [dataset[i]["samples"].data.tobytes() for i in indices]


def own_store(endpoint: str, credentials: object = None):  # type: ignore[no-untyped-def]
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage
    from signal_dataset.storage import GCSObjectStore

    client = storage.Client(
        project="p",
        credentials=credentials if credentials is not None else AnonymousCredentials(),
        client_options={"api_endpoint": endpoint},
    )
    return GCSObjectStore(client)


def test_a_store_with_credentials_of_its_own_refuses_to_pickle_and_says_why(
    gcs_server, gcs_dataset, no_environment_identity
) -> None:
    import torch_required  # noqa: F401 - skips this test without torch

    from google.oauth2.credentials import Credentials

    from sds_loader.torch import SDSTorchDataset

    uri, local = gcs_dataset
    store = own_store(gcs_server.url, Credentials(token=TOKEN))
    reader = sds_loader.BatchReader(uri, object_store=store)
    assert rows(reader.read([3])) == local_rows(local, [3])
    with pytest.raises(ValueError, match="wraps a client with credentials of its own") as raised:
        pickle.dumps(reader)
    assert TOKEN not in str(raised.value)
    assert "start DataLoader workers with fork" in str(raised.value)
    with pytest.raises(ValueError, match="wraps a client with credentials of its own"):
        pickle.dumps(SDSTorchDataset(uri, object_store=store))


def test_a_store_with_an_endpoint_of_its_own_refuses_to_pickle(gcs_server, gcs_dataset) -> None:
    uri, local = gcs_dataset
    # The same server by another name: an endpoint the environment does not give.
    elsewhere = gcs_server.url.replace("127.0.0.1", "localhost")
    reader = sds_loader.BatchReader(uri, object_store=own_store(elsewhere))
    assert rows(reader.read([5])) == local_rows(local, [5])
    with pytest.raises(ValueError, match=f"an endpoint of its own \\(endpoint {elsewhere}\\)"):
        pickle.dumps(reader)


def test_a_store_the_environment_describes_crosses_and_reads_alike(gcs_server, gcs_dataset) -> None:
    uri, local = gcs_dataset
    reader = sds_loader.BatchReader(uri, object_store=own_store(gcs_server.url))
    again = pickle.loads(pickle.dumps(reader))
    assert rows(again.read([47, 0])) == local_rows(local, [47, 0])


def _note_store(folder: str, parent: tuple[int, int], worker: int) -> None:
    """In a worker: write whether its store and client are the parent's (as inherited by the fork)."""
    from torch.utils.data import get_worker_info

    dataset = get_worker_info().dataset
    store = dataset.reader.object_store
    client = store._client
    Path(folder, f"{worker}.json").write_text(
        json.dumps({"store": id(store) == parent[0], "client": id(client) == parent[1], "pid": os.getpid()})
    )


def test_forked_workers_get_a_client_of_their_own(gcs_server, gcs_dataset, tmp_path: Path) -> None:
    from torch_required import torch  # noqa: F401

    from torch.utils.data import DataLoader

    from sds_loader.torch import SDSTorchDataset, collate

    uri, local = gcs_dataset
    store = own_store(gcs_server.url)
    dataset = SDSTorchDataset(uri, object_store=store)
    dataset.__getitems__([0, 1])  # the parent's session has connections at the fork
    assert dataset.reader.object_store is store
    folder = tmp_path / "stores"
    folder.mkdir()
    loader = DataLoader(
        dataset,
        batch_size=8,
        num_workers=2,
        multiprocessing_context="fork",
        collate_fn=collate,
        worker_init_fn=functools.partial(_note_store, str(folder), (id(store), id(store._client))),
    )
    got = [row.numpy().tobytes() for batch in loader for row in batch["inputs"]]
    assert got == local_rows(local, list(range(48)))
    notes = [json.loads(path.read_text()) for path in sorted(folder.iterdir())]
    assert len(notes) == 2
    assert not any(note["store"] or note["client"] for note in notes), notes
