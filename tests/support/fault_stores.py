"""A dataset in a real store, read through a `FaultProxy`: S3 (`rclone serve s3`) or GCS (fake-gcs-server).

The fault tests run the same cases against both stores; `ProxiedStore`
gives them what differs (how a signal_dataset store is pointed at the
proxy) and what they check every row against: signal_dataset's reader of
the local copy the server serves, so a row is exact when its bytes are that
reader's.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import signal_dataset as sds
from fault_proxy import FaultProxy
from s3_fixtures import endpoint_options

#: What the fault tests read: the records' samples and their label.
FIELDS = ("samples",)
TARGETS = ("label",)
#: The keys of those in a BatchReader's batch (an SDSTorchDataset's are "inputs" and "target").
KEYS = ("samples", "label")


@dataclass
class ProxiedStore:
    """`uri` in the store named by `kind` ("s3" or "gcs"), reached through `proxy`; `local` is its copy."""

    kind: str
    uri: str
    local: str
    proxy: FaultProxy

    def object_store(self, *, max_attempts: int | None = None) -> object:
        """A signal_dataset store whose requests, the shards' included, go through the proxy."""
        if self.kind == "s3":
            from signal_dataset.storage import S3ObjectStore

            options = endpoint_options(self.proxy.url)
            if max_attempts is not None:
                options = dataclasses.replace(options, max_attempts=max_attempts)
            return S3ObjectStore(options=options)
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage
        from signal_dataset.storage import GCSObjectStore

        assert max_attempts is None, "a GCS store's shards are read with 5 attempts"
        client = storage.Client(
            project="test",
            credentials=AnonymousCredentials(),
            client_options={"api_endpoint": self.proxy.url},
        )
        return GCSObjectStore(client)

    @property
    def max_attempts(self) -> int:
        return 5

    def __len__(self) -> int:
        return len(reference(self.local))

    def assert_rows(
        self, batch: Mapping[str, object], indices: Sequence[int], keys: tuple[str, str] = KEYS
    ) -> None:
        """Each row of `batch` is signal_dataset's record `indices[k]`, byte for byte, label included."""
        rows = reference(self.local)
        samples, labels = (np.asarray(batch[key]) for key in keys)
        assert samples.shape[0] == labels.shape[0] == len(indices)
        for row, index in enumerate(indices):
            expected, label = rows[index]
            assert samples[row].tobytes() == expected, f"row {row} is not record {index}"
            assert labels[row] == label, f"row {row}: label of record {index}"

    def ordinals_of(self, batch: Mapping[str, object], keys: tuple[str, str] = KEYS) -> list[int]:
        """The ordinal of each row of `batch`, found by its exact bytes (label checked too)."""
        rows = reference(self.local)
        by_bytes = {samples: (ordinal, label) for ordinal, (samples, label) in enumerate(rows)}
        found = []
        samples_key, label_key = keys
        for samples, label in zip(np.asarray(batch[samples_key]), np.asarray(batch[label_key]), strict=True):
            hit = by_bytes.get(samples.tobytes())
            assert hit is not None, "a row matches no record of the dataset"
            assert hit[1] == label, f"record {hit[0]} came with another label"
            found.append(hit[0])
        return found


@functools.cache
def reference(local: str) -> tuple[tuple[bytes, int], ...]:
    """(samples' bytes, label) of every record, as signal_dataset reads the local copy."""
    dataset = sds.open(os.fspath(local))
    return tuple(
        (record["samples"].data.tobytes(), int(record.metadata["label"]))
        for record in (dataset[i] for i in range(len(dataset)))
    )
