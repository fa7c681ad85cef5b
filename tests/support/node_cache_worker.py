"""A training process for the node-cache tests: one epoch through 2 DataLoader workers, rows checked.

Run as ``python node_cache_worker.py URI ENDPOINT CACHE_DIR LOCAL_COPY SEED``
(credentials from the environment): reads every record of URI in the order
SEED shuffles, through 2 forked DataLoader workers whose datasets share
CACHE_DIR, and checks each row against signal_dataset's reader of LOCAL_COPY.
Kept apart from the tests so that each process starts from nothing: its own
interpreter, its own readers, its own native sources.
"""

from __future__ import annotations

import random
import sys

import numpy as np
import signal_dataset as sds
from signal_dataset.storage import S3ObjectStore
from signal_dataset.storage.backends.s3 import S3Options
from torch.utils.data import DataLoader

from sds_loader.torch import SDSTorchDataset


def main(uri: str, endpoint: str, cache_dir: str, local: str, seed: int) -> None:
    store = S3ObjectStore(
        options=S3Options(endpoint_url=endpoint, region_name="us-east-1", addressing_style="path")
    )
    dataset = SDSTorchDataset(uri, object_store=store, cache_dir=cache_dir)
    order = list(range(len(dataset)))
    random.Random(seed).shuffle(order)
    loader = DataLoader(dataset, batch_size=8, sampler=order, num_workers=2, multiprocessing_context="fork")
    reference = sds.open(local)
    rows = 0
    for start, batch in zip(range(0, len(order), 8), loader, strict=True):
        for row, index in enumerate(order[start : start + 8]):
            expected = reference[index]["samples"].data
            got = batch["inputs"][row].numpy()
            assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes(), index
            assert int(batch["target"][row]) == int(np.asarray(reference[index].metadata["label"])), index
            rows += 1
    assert rows == len(order)
    print(f"rows {rows}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
