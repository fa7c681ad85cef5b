"""SDSTorchDataset over a reference dataset in persistent forked workers.

A view of plain shards is read natively; a view of transposed shards has
its records served by signal_dataset's reader. array_record's reader crashes
a persistent forked worker when the parent process read records before
forking, so the dataset must not read any record in the parent on its own
account. The loop runs in a child interpreter so that a crash fails this
test instead of the suite.
"""

from __future__ import annotations

import torch_required  # noqa: F401 - skips this module without torch

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import signal_dataset as sds
from sds_factory import capture, write_dataset

RECORDS = 48

SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import signal_dataset as sds
    from torch.utils.data import DataLoader
    from sds_loader.torch import SDSTorchDataset, collate

    root = sys.argv[1]
    batches = [[int(x) for x in np.random.default_rng(e).permutation({records})[:16]]
               for e in range(3)]
    dataset = SDSTorchDataset(root)
    loader = DataLoader(dataset, batch_sampler=batches, num_workers=2, collate_fn=collate,
                        persistent_workers=True, multiprocessing_context="fork")
    reference = sds.open(root)
    for epoch in range(3):
        for indices, batch in zip(batches, loader):
            for row, index in enumerate(indices):
                record = reference[index]
                assert batch["inputs"][row].numpy().tobytes() == record["samples"].data.tobytes()
                assert int(batch["target"][row]) == record.metadata["label"]
    print("checked", flush=True)
    """
).format(records=RECORDS)


@pytest.fixture(scope="module", params=[None, "group_size:1,transpose:true"], ids=["plain", "transposed"])
def view_root(request, tmp_path_factory) -> str:
    source = tmp_path_factory.mktemp("source")
    write_dataset(
        source, RECORDS, lambda i: capture(i, samples=512), records_per_shard=16, writer_options=request.param
    )
    order = [int(i) for i in np.random.default_rng(7).permutation(RECORDS)]
    view = os.fspath(tmp_path_factory.mktemp("view") / "view")
    sds.open(os.fspath(source)).select(order).publish(view, dataset_id="view", snapshot_id="v1")
    return view


def test_persistent_fork_workers_read_a_reference_dataset(view_root: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, view_root],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "checked" in result.stdout
