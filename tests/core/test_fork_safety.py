"""No path that reads through signal_dataset may break DataLoader workers forked later.

array_record, which signal_dataset reads and writes shards with, leaves a
process in a state that crashes persistent DataLoader workers forked from it
(reproduced here with a dataset in S3). Here the main process first reads
through every path that still uses signal_dataset's reader (transposed chunks
on disk and in S3, a reference dataset of transposed shards, single records and batches,
BatchReader and SDSTorchDataset alike), then iterates a DataLoader with two
forked persistent workers over each of those datasets for two epochs, and
checks every batch against signal_dataset (read in a separate process, so
that the check itself cannot cause the crash).
"""

from __future__ import annotations

from torch_required import torch

import multiprocessing
import os

import numpy as np
import pytest
from s3_fixtures import rclone_process, upload_dataset
from sds_factory import capture, write_dataset
from torch.utils.data import DataLoader

import sds_loader
from sds_loader.torch import SDSTorchDataset, collate

TRANSPOSED = "group_size:1,transpose:true"


@pytest.fixture(scope="module")
def fallback_datasets(request, tmp_path_factory) -> dict[str, str]:
    import signal_dataset as sds

    transposed = tmp_path_factory.mktemp("fork-transposed")
    write_dataset(transposed, 24, capture, records_per_shard=8, writer_options=TRANSPOSED)
    in_s3 = upload_dataset(rclone_process(request), transposed, "fork-transposed")
    source = tmp_path_factory.mktemp("fork-source")
    # A view of plain shards is read natively; of transposed ones, by signal_dataset.
    write_dataset(source, 24, capture, records_per_shard=8, writer_options=TRANSPOSED)
    reference = tmp_path_factory.mktemp("fork-reference") / "published"
    sds.open(os.fspath(source)).select(list(range(23, -1, -1))).publish(
        os.fspath(reference), dataset_id="reversed", snapshot_id="v1"
    )
    return {"transposed": os.fspath(transposed), "reference": os.fspath(reference), "transposed in s3": in_s3}


def _expected(uri: str, queue) -> None:
    import signal_dataset as sds

    dataset = sds.open(uri)
    queue.put(
        (
            np.stack([dataset[i]["samples"].data for i in range(len(dataset))]),
            np.asarray([dataset[i].metadata["label"] for i in range(len(dataset))]),
        )
    )


def expected_from_signal_dataset(uri: str) -> tuple[np.ndarray, np.ndarray]:
    """Every record's samples and label, read by signal_dataset in a spawned process."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_expected, args=(uri, queue))
    process.start()
    result = queue.get(timeout=120)
    process.join(timeout=60)
    return result


def test_forked_persistent_workers_after_every_fallback_read(fallback_datasets, rclone_server):
    local = {name: uri for name, uri in fallback_datasets.items() if "://" not in uri}
    expected = {name: expected_from_signal_dataset(uri) for name, uri in local.items()}
    # The same records, copied to S3.
    expected["transposed in s3"] = expected["transposed"]

    # The main process reads each dataset through each entry point first.
    for name, uri in fallback_datasets.items():
        reader = sds_loader.BatchReader(uri, targets=("label",))
        batch = reader.read([3, 1, 3])
        assert batch["samples"].tobytes() == expected[name][0][[3, 1, 3]].tobytes()
        assert reader[5]["samples"].tobytes() == expected[name][0][5].tobytes()
        assert reader.stats.fallback_records == 4
        dataset = SDSTorchDataset(uri)
        assert dataset[2]["target"].item() == expected[name][1][2]

    for name, uri in fallback_datasets.items():
        dataset = SDSTorchDataset(uri)
        dataset.__getitems__([0, 1])
        loader = DataLoader(
            dataset,
            batch_size=5,
            shuffle=True,
            num_workers=2,
            persistent_workers=True,
            multiprocessing_context="fork",
            collate_fn=collate,
            generator=torch.Generator().manual_seed(1),
        )
        samples, labels = expected[name]
        for _epoch in range(2):
            seen = []
            for batch in loader:
                seen.append(batch["inputs"].numpy().copy())
            got = np.concatenate(seen)
            # A shuffled epoch holds every record once: compare as sorted rows.
            assert sorted(map(bytes, got.reshape(len(got), -1).view(np.uint8))) == sorted(
                map(bytes, samples.reshape(len(samples), -1).view(np.uint8))
            )
