"""Two ranks under torchrun split each epoch, with DistributedSampler or ShardAwareSampler."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import signal_dataset as sds

pytest.importorskip("torch")
pytest.importorskip("torch.distributed")

from sds_factory import field, write_dataset  # noqa: E402

RECORDS = 30
EPOCHS = 3
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed_worker.py")


def make_record(ordinal: int) -> sds.Record:
    rng = np.random.default_rng(ordinal)
    samples = (rng.standard_normal((1, 32)) + 1j * rng.standard_normal((1, 32))).astype(np.complex64)
    return sds.Record(
        id=f"r{ordinal:04d}",
        fields={"samples": field(samples)},
        metadata={"label": ordinal % 3, "index": ordinal},
    )


@pytest.mark.parametrize("sampler", ["distributed", "shard-aware"])
def test_two_ranks_split_every_epoch(tmp_path, sampler) -> None:
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    root = tmp_path / "captures"
    write_dataset(root, RECORDS, make_record, records_per_shard=8)
    out = tmp_path / "ranks"
    out.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), OMP_NUM_THREADS="1")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            WORKER,
            str(root),
            str(out),
            str(EPOCHS),
            sampler,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    reports = [json.loads((out / f"rank-{rank}.json").read_text()) for rank in (0, 1)]
    assert [r["world"] for r in reports] == [2, 2]
    for epoch in range(EPOCHS):
        first, second = (r["epochs"][epoch] for r in reports)
        assert len(first) == len(second) == RECORDS // 2
        assert not set(first) & set(second)
        assert sorted(first + second) == list(range(RECORDS))
    # set_epoch reshuffles: no rank sees the same order twice.
    for report in reports:
        assert len({tuple(order) for order in report["epochs"]}) == EPOCHS
