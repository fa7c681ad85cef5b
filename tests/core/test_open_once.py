"""A dataset is tabulated once per job: DataLoader workers, forked or spawned, read no manifest page.

The parent builds the shard table when the dataset is made; a forked worker
finds it in the memory it shares with its parent, a spawned one receives it
with the pickled dataset. Each worker replaces the table builder with one
that fails, so a worker that reads the manifests again fails its batch, and
the batches are compared with signal_dataset byte for byte.
"""

from __future__ import annotations

from torch_required import torch  # noqa: F401 - skips this module without torch

import pytest
import signal_dataset as sds
from manifest_reads import refuse_manifest_reads
from sds_factory import write_dataset
from torch.utils.data import DataLoader

from sds_loader.torch import SDSTorchDataset, collate


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("open-once") / "ds"
    write_dataset(path, 60, records_per_shard=3, shards_per_manifest=4)
    return str(path)


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_workers_read_no_manifest_page(root: str, context: str) -> None:
    dataset = SDSTorchDataset(root, threads=1)
    loader = DataLoader(
        dataset,
        batch_size=8,
        num_workers=2,
        multiprocessing_context=context,
        worker_init_fn=refuse_manifest_reads,
        collate_fn=collate,
    )
    reference = sds.open(root)
    rows = [row.numpy().tobytes() for batch in loader for row in batch["inputs"]]
    assert rows == [reference[i]["samples"].data.tobytes() for i in range(len(reference))]
