"""An epoch saved on two ranks under torchrun, resumed on one and on three (gloo, CPU).

The two ranks read two batches each through a StatefulDataLoader with a
worker and save its state; new processes resume the epoch from it on one
rank with two workers (the sampler's state out of the loader's) and on
three ranks with one worker (the loader's own state). Each resumed world
serves the records the first had not, byte for byte signal_dataset's,
each once (three ranks pad with one), in the order the samplers give in
this process.
"""

from __future__ import annotations

import torch_required  # noqa: F401 - skips this module without torch

import json
import os
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
import signal_dataset as sds

pytest.importorskip("torch.distributed")
pytest.importorskip("torchdata.stateful_dataloader")

from repo_paths import SUPPORT
from sds_factory import field, write_dataset  # noqa: E402

RECORDS = 30
STOP_AFTER = 2  # batches of 4 each rank reads before the interruption
WORKER = os.path.join(SUPPORT, "elastic_worker.py")


def make_record(ordinal: int) -> sds.Record:
    rng = np.random.default_rng(ordinal)
    samples = (rng.standard_normal((1, 32)) + 1j * rng.standard_normal((1, 32))).astype(np.complex64)
    return sds.Record(
        id=f"r{ordinal:04d}",
        fields={"samples": field(samples)},
        metadata={"label": ordinal % 3, "index": ordinal},
    )


def torchrun(ranks: int, *args: str) -> None:
    """Run the worker on `ranks` ranks; fail with its output if a rank fails (a row that
    differs from signal_dataset's record fails the rank)."""
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), OMP_NUM_THREADS="1")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={ranks}",
            WORKER,
            *args,
        ],
        capture_output=True,
        text=True,
        env=environment,
        timeout=180,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def expected_orders(root: str, world: int) -> tuple[list[list[int]], list[list[int]]]:
    """(each old rank's first batches, each of `world` new ranks' rest), computed in this process."""
    from sds_loader.torch import ShardAwareSampler

    def sampler(replicas: int, rank: int) -> ShardAwareSampler:
        made = ShardAwareSampler(root, seed=5, run_length=2, runs_mixed=2, num_replicas=replicas, rank=rank)
        made.set_epoch(1)
        return made

    old = [sampler(2, rank) for rank in (0, 1)]
    heads = [order[: STOP_AFTER * 4] for order in (made.rank_items() for made in old)]
    iterator = iter(old[0])
    for _ in range(STOP_AFTER * 4):
        next(iterator)
    state = old[0].state_dict()
    rests = []
    for rank in range(world):
        new = sampler(world, rank)
        new.load_state_dict(state)
        rests.append(list(new))
    return heads, rests


@pytest.mark.slow
def test_an_epoch_saved_on_two_ranks_resumes_on_one_and_on_three(tmp_path) -> None:
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    root = tmp_path / "captures"
    write_dataset(root, RECORDS, make_record, records_per_shard=8)
    out = tmp_path / "ranks"
    out.mkdir()
    torchrun(2, str(root), str(out), "save", str(STOP_AFTER))
    heads = [json.loads((out / f"saved-{rank}.json").read_text())["order"] for rank in (0, 1)]
    assert [len(head) for head in heads] == [STOP_AFTER * 4] * 2
    for world, workers in ((1, 2), (3, 1)):
        torchrun(world, str(root), str(out), "resume", str(workers))
        reports = [json.loads((out / f"resumed-{world}-{rank}.json").read_text()) for rank in range(world)]
        assert [(r["world"], r["workers"]) for r in reports] == [(world, workers)] * world
        rests = [r["order"] for r in reports]
        counts = Counter(i for order in heads + rests for i in order)
        assert set(counts) == set(range(RECORDS)), world
        assert sum(counts.values()) - RECORDS <= world - 1
        assert len({len(rest) for rest in rests}) == 1  # the same number of steps on every new rank
        assert (heads, rests) == expected_orders(os.fspath(root), world)
