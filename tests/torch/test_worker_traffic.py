"""With DataLoader workers over object storage, every byte fetched is read by someone, and counted.

One epoch of a `ShardAwareSampler` over `rclone serve s3`, two forked
workers, behind a proxy that counts the bytes the server sends:

- the epoch fetches at most 1.1x the shards' bytes, with a node cache and
  without one (the main process, where the sampler announces what comes
  next, reads no batch: its readahead must not fetch into its own memory);
- the `stats` of the main process and of every worker, summed, match the
  bytes the server sent within 5% (each worker's are collected when it
  exits, through a hook of this test's own).
"""

from __future__ import annotations

from torch_required import torch  # noqa: F401

import functools
import json
import multiprocessing.util
import os
from pathlib import Path

import pytest
from native_required import _native  # noqa: F401
from s3_fixtures import BUCKET, endpoint_options
from sds_factory import capture, write_dataset
from shaping_proxy import BenchProxy
from signal_dataset.storage import S3ObjectStore

RECORDS = 128
BATCH = 16


def _keep_stats_at_exit(folder: str, worker: int) -> None:
    """In a worker: write its reader's stats to `folder` when the worker process exits."""
    from torch.utils.data import get_worker_info

    def dump() -> None:
        dataset = get_worker_info().dataset
        local = dataset._local
        if local is None or local.pid != os.getpid():
            return
        reader = local.reader
        state = reader.opened_state()
        source = state.source if state is not None else None
        if source is not None:
            source.wait_readahead(30)
        stats = reader.stats
        Path(folder, f"{os.getpid()}.json").write_text(
            json.dumps({"fetched_bytes": stats.fetched_bytes, "batches": stats.batches})
        )

    multiprocessing.util.Finalize(None, dump, exitpriority=100)


@pytest.fixture
def served(rclone_server, tmp_path: Path) -> tuple[str, int]:
    """(s3:// URI, bytes of its shards, data and metadata) of 128 records of 64 kB in 4 shards.

    Shards of 2 MB: each process that opens a shard fetches its last 128 KiB
    (the footer and the chunks before it) at once, a share that shards of a
    few records would make most of the traffic.
    """
    local = tmp_path / "local"
    write_dataset(local, RECORDS, functools.partial(capture, samples=4096), records_per_shard=32)
    shards = sum(path.stat().st_size for path in local.glob("objects/*/*/*.arrayrecord"))
    return rclone_server.upload_tree(local, BUCKET, f"traffic-{tmp_path.name}"), shards


@pytest.mark.slow
@pytest.mark.parametrize("cached", [False, True], ids=["no-cache", "node-cache"])
def test_an_epoch_with_workers_fetches_each_byte_once_and_counts_it(
    rclone_server, served, tmp_path: Path, cached: bool
) -> None:
    from torch.utils.data import DataLoader

    from sds_loader.samplers import ShardAwareSampler
    from sds_loader.torch import SDSTorchDataset, collate

    uri, shard_bytes = served
    folder = tmp_path / "worker-stats"
    folder.mkdir()
    with BenchProxy(rclone_server.url) as proxy:
        dataset = SDSTorchDataset(
            uri,
            object_store=S3ObjectStore(options=endpoint_options(proxy.url)),
            cache_dir=tmp_path / "cache" if cached else None,
        )
        sampler = ShardAwareSampler(dataset, run_length=4, runs_mixed=4, seed=1)
        loader = DataLoader(
            dataset,
            batch_size=BATCH,
            sampler=sampler,
            num_workers=2,
            multiprocessing_context="fork",
            collate_fn=collate,
            worker_init_fn=functools.partial(_keep_stats_at_exit, str(folder)),
        )
        assert sum(len(batch["inputs"]) for batch in loader) == RECORDS
        main = dataset.reader
        state = main.opened_state()
        if state is not None and state.source is not None:
            state.source.wait_readahead(30)
        main_bytes = main.stats.fetched_bytes
        sent = proxy.counts().body_bytes
    workers = [json.loads(path.read_text()) for path in folder.glob("*.json")]
    assert len(workers) == 2, "a worker's stats were not collected"
    assert sum(worker["batches"] for worker in workers) == RECORDS // BATCH
    assert sent <= 1.1 * shard_bytes, (
        f"the epoch fetched {sent} bytes for {shard_bytes} bytes of shards ({sent / shard_bytes:.2f}x)"
    )
    counted = main_bytes + sum(worker["fetched_bytes"] for worker in workers)
    assert abs(counted - sent) <= 0.05 * sent, (
        f"stats summed over the processes count {counted} bytes; the server sent {sent} "
        f"(main {main_bytes}, workers {[worker['fetched_bytes'] for worker in workers]})"
    )
