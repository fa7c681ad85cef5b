"""Processes sharing a node cache never wait on each other while holding what the other needs.

Ranks that start together over a fresh cache each open every shard (its
footer, under a per-URL lock) and fetch records (under per-range claims).
Against the real rclone S3 server, with real processes: four starting at
the same instant each get their batch within twice the time of one alone
(a process that held some shards' locks while waiting for the others' used
to sit until the stall timeout, 30 s), and two readers whose ranges overlap
behind a slow server each finish within twice that fetch. The usage file
then holds exactly the bytes on disk.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from native_required import _native  # noqa: F401
from rclone_server import CREDENTIALS
from repo_paths import SUPPORT
from s3_fixtures import endpoint_options
from s3_server import FaultProxy
from sds_factory import capture, write_dataset

from sds_loader.storage.cache_settings import CacheSettings
from sds_loader.storage.s3_source import S3RangeSource

SHARDS = 16


def counted_bytes(cache: Path) -> int:
    """What the cache's files that count against its limit take: entries and temporaries."""
    names = re.compile(r"[0-9a-f]{16}-[0-9a-f]{16}|\.tmp-\d+-\d+-\d+")
    return sum(p.stat().st_size for p in cache.rglob("*") if names.fullmatch(p.name))


def usage(cache: Path) -> int:
    return int((cache / "sds-loader-cache-v1" / "usage").read_text())


_MADE: dict[str, tuple[str, Path]] = {}


@pytest.fixture
def many_shards(tmp_path_factory, rclone_server) -> tuple[str, Path]:
    """(URI, local copy) of 32 records of 16 kB in 16 shards, made once for the module."""
    if "many" not in _MADE:
        local = tmp_path_factory.mktemp("start-local")
        write_dataset(local, SHARDS * 2, functools.partial(capture, samples=2048), records_per_shard=2)
        _MADE["many"] = rclone_server.upload_tree(local, "datasets", "start-together"), local
    return _MADE["many"]


def start_together(uri: str, cache: Path, tmp_path: Path, sets: list[list[int]], env: dict) -> list[float]:
    go = tmp_path / f"go-{len(sets)}-{time.monotonic_ns()}"
    worker = os.path.join(SUPPORT, "cache_start_worker.py")
    processes = [
        subprocess.Popen(
            [sys.executable, worker, uri, os.fspath(cache), os.fspath(go), ",".join(map(str, wanted))],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for wanted in sets
    ]
    time.sleep(3.0)  # every process imported and opened its reader
    go.write_text("go")
    seconds = []
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        seconds.append(float(out.split()[-1]))
    return seconds


def test_ranks_starting_together_over_a_fresh_cache_do_not_wait_on_each_other(
    rclone_server, many_shards, tmp_path
):
    uri, _ = many_shards
    env = dict(os.environ, **CREDENTIALS, PYTHONPATH=SUPPORT, AWS_ENDPOINT_URL_S3=rclone_server.url)
    # One record of each shard, a different one for each rank, in another order each.
    sets = [[2 * s + (rank % 2) for s in range(SHARDS)][rank::1] for rank in range(4)]
    sets = [wanted[rank * 4 :] + wanted[: rank * 4] for rank, wanted in enumerate(sets)]
    alone = start_together(uri, tmp_path / "alone", tmp_path, sets[:1], env)[0]
    together = start_together(uri, tmp_path / "shared", tmp_path, sets, env)
    # Four processes share two cores here: twice the time alone, plus what
    # sharing the cores costs, is far below the 30 s a stall took.
    bound = 2 * alone + 1.0
    assert max(together) <= bound, (together, alone)
    assert usage(tmp_path / "shared") == counted_bytes(tmp_path / "shared")


def test_readers_whose_claims_overlap_finish_within_twice_the_slow_fetch(
    rclone_server, many_shards, tmp_path
):
    # Two readers each want a range of each of 16 objects, in opposite
    # orders: each claims ranges until it meets one the other claimed. A read
    # that kept its claims while it waited sat until the stall timeout (8 s
    # here); one that lets its own claims be fetched first does not.
    client = rclone_server.client()
    blobs = [os.urandom(400_000) for _ in range(16)]
    uris = []
    for k, blob in enumerate(blobs):
        client.put_object(Bucket="datasets", Key=f"overlap/blob-{k}.bin", Body=blob)
        uris.append(f"s3://datasets/overlap/blob-{k}.bin")
    proxy = FaultProxy(rclone_server.port)
    proxy.plan_sees_range = True
    delay = 1.0

    def plan(n, method, path, range_=None):  # type: ignore[no-untyped-def]
        if range_ and range_.startswith("bytes=100000-"):  # the wanted ranges, not the tails
            time.sleep(delay)
        return "pass"

    proxy.plan = plan  # type: ignore[assignment]
    settings = CacheSettings(directory=os.fspath(tmp_path / "cache"))
    sources = [
        S3RangeSource(uris, endpoint_options(proxy.url), cache=settings, read_timeout=8.0) for _ in range(2)
    ]
    for source in sources:  # the tails, so that only the ranges' claims meet
        source.fetch([(f, 0, memoryview(bytearray(16))) for f in range(len(blobs))])
    took: dict[int, float] = {}
    failures: list[BaseException] = []

    def read(k: int) -> None:
        try:
            order = list(range(len(blobs))) if k == 0 else list(reversed(range(len(blobs))))
            buffers = {f: bytearray(100_000) for f in order}
            start = time.perf_counter()
            sources[k].fetch([(f, 100_000, memoryview(buffers[f])) for f in order])
            took[k] = time.perf_counter() - start
            for f in order:
                assert bytes(buffers[f]) == blobs[f][100_000:200_000]
        except BaseException as error:  # noqa: BLE001 - reported below
            failures.append(error)

    try:
        threads = [threading.Thread(target=read, args=(k,)) for k in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        proxy.close()
    assert not failures, failures
    assert max(took.values()) <= 2 * delay + 1.0, took
