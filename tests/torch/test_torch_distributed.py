"""Two ranks under torchrun split each epoch, with DistributedSampler or ShardAwareSampler.

On local shards, and on a dataset in object storage (`rclone serve s3` on
127.0.0.1) read by DataLoader workers, where an epoch is interrupted, its
loader state saved, and finished by new processes that load it.
"""

from __future__ import annotations

import torch_required  # noqa: F401 - skips this module without torch

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import signal_dataset as sds

pytest.importorskip("torch.distributed")

from repo_paths import SUPPORT
from s3_fixtures import upload_dataset
from sds_factory import field, write_dataset  # noqa: E402

RECORDS = 30
EPOCHS = 3
WORKER = os.path.join(SUPPORT, "distributed_worker.py")


def make_record(ordinal: int) -> sds.Record:
    rng = np.random.default_rng(ordinal)
    samples = (rng.standard_normal((1, 32)) + 1j * rng.standard_normal((1, 32))).astype(np.complex64)
    return sds.Record(
        id=f"r{ordinal:04d}",
        fields={"samples": field(samples)},
        metadata={"label": ordinal % 3, "index": ordinal},
    )


def torchrun(*args: str, env: dict[str, str] | None = None) -> None:
    """Run the worker on two ranks; fail with its output if a rank fails (a batch that
    differs from signal_dataset's record fails the rank)."""
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), OMP_NUM_THREADS="1", **(env or {}))
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", WORKER, *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def require_gloo() -> None:
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")


@pytest.mark.parametrize("sampler", ["distributed", "shard-aware"])
def test_two_ranks_split_every_epoch(tmp_path, sampler) -> None:
    require_gloo()
    root = tmp_path / "captures"
    write_dataset(root, RECORDS, make_record, records_per_shard=8)
    out = tmp_path / "ranks"
    out.mkdir()
    torchrun(str(root), str(out), str(EPOCHS), sampler)
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


def rank_orders(sampler: str, root: str, epoch: int) -> list[list[int]]:
    """What each of two ranks' sampler yields in `epoch`, computed here in one process."""
    from torch.utils.data.distributed import DistributedSampler

    from sds_loader.torch import ShardAwareSampler

    orders = []
    for rank in (0, 1):
        if sampler == "shard-aware":
            made = ShardAwareSampler(root, seed=5, run_length=2, runs_mixed=2, num_replicas=2, rank=rank)
        else:
            made = DistributedSampler(range(RECORDS), num_replicas=2, rank=rank, shuffle=True, seed=5)
        made.set_epoch(epoch)
        orders.append(list(made))
    return orders


STOP_AFTER = 2  # batches of 4 read before the interruption


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["distributed", "shard-aware"])
def test_two_ranks_read_object_storage_and_resume_an_interrupted_epoch(
    tmp_path, rclone_server, sampler
) -> None:
    """Each rank reads s3:// through SDSTorchDataset and a DataLoader worker: every epoch
    serves each ordinal once across ranks, byte for byte signal_dataset's record; an
    epoch interrupted after two batches and resumed from the saved loader state by new
    processes serves exactly the rest, in the order an uninterrupted epoch would have."""
    require_gloo()
    local = tmp_path / "captures"
    write_dataset(local, RECORDS, make_record, records_per_shard=8)
    uri = upload_dataset(rclone_server, local, f"distributed-{sampler}")
    out = tmp_path / "ranks"
    out.mkdir()
    env = {"SDS_TEST_S3_ENDPOINT": rclone_server.url}
    torchrun(uri, str(out), "2", sampler, str(STOP_AFTER), env=env)
    torchrun(uri, str(out), "2", sampler, "resume", env=env)
    reports = [json.loads((out / f"rank-{rank}.json").read_text()) for rank in (0, 1)]
    resumed = [json.loads((out / f"rank-{rank}-resumed.json").read_text())["order"] for rank in (0, 1)]
    assert [r["world"] for r in reports] == [2, 2]
    whole, interrupted = zip(*(r["epochs"] for r in reports), strict=True)
    # Epoch 0, read whole: each ordinal exactly once across the ranks.
    assert [len(order) for order in whole] == [RECORDS // 2] * 2
    assert sorted(whole[0] + whole[1]) == list(range(RECORDS))
    # Epoch 1: two batches, then the rest from new processes; nothing lost, nothing twice.
    assert [len(order) for order in interrupted] == [STOP_AFTER * 4] * 2
    finished = [head + rest for head, rest in zip(interrupted, resumed, strict=True)]
    assert sorted(finished[0] + finished[1]) == list(range(RECORDS))
    assert finished == rank_orders(sampler, os.fspath(local), 1)
    assert list(whole) == rank_orders(sampler, os.fspath(local), 0)
