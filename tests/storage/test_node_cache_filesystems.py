"""The node cache on filesystems that lack what it relies on, and what crashed writers leave.

NFS has no RENAME_NOREPLACE on older servers and emulates flock with POSIX
locks, which are per process: a lock cannot tell this process's live claim
from a dead one, and threads of one process do not exclude each other
through it. With both faults made on a local directory (`posix_locks` takes
fcntl locks, which behave exactly so), against the real rclone S3 server:
readers in one process and forked worker processes fill and read one cache
with every row exact, no temporary file or claim is left behind, every range
is stored once, and the usage file holds exactly the bytes on disk. A
temporary file left by a process that died is counted and swept.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from native_required import _native
from sds_factory import assert_batch

import sds_loader

ALL = list(range(48))
FIELDS = ("samples",)
TARGETS = ("label",)
LAYOUT = "sds-loader-cache-v1"
COUNTED = re.compile(r"[0-9a-f]{16}-[0-9a-f]{16}|\.tmp-\d+-\d+-\d+")


def counted_bytes(cache: Path) -> int:
    return sum(p.stat().st_size for p in cache.rglob("*") if COUNTED.fullmatch(p.name))


def usage(cache: Path) -> int:
    return int((cache / LAYOUT / "usage").read_text())


def data_shards(local: str) -> int:
    return sum(p.stat().st_size for p in Path(local).rglob("*") if "/objects/data/" in p.as_posix())


def leftovers(cache: Path) -> list[Path]:
    return [p for p in cache.rglob("*") if p.name.startswith(".tmp-") or p.name.endswith(".fetching")]


@pytest.fixture
def nfs_like():
    _native.node_cache_faults(no_rename_noreplace=True, posix_locks=True)
    try:
        yield
    finally:
        _native.node_cache_faults()


def read_all(reader: sds_loader.BatchReader, reference: str, order: list[int], batch: int = 8) -> None:
    for start in range(0, len(order), batch):
        indices = order[start : start + batch]
        assert_batch(reference, reader.read(indices), indices, FIELDS, TARGETS)


def test_readers_and_processes_share_a_cache_without_rename_noreplace_or_process_locks(
    rclone_server, rclone_dataset, tmp_path, nfs_like
):
    uri, local = rclone_dataset
    cache = tmp_path / "cache"
    # Two readers of one process (two instances, whose temporary names and
    # claims must not meet), reading the same records at once.
    readers = [sds_loader.BatchReader(uri, targets=TARGETS, cache_dir=cache, threads=2) for _ in range(2)]
    failures: list[BaseException] = []

    def run(reader: sds_loader.BatchReader, order: list[int]) -> None:
        try:
            read_all(reader, uri, order)
        except BaseException as error:  # noqa: BLE001 - reported below
            failures.append(error)

    threads = [
        threading.Thread(target=run, args=(readers[0], ALL)),
        threading.Thread(target=run, args=(readers[1], ALL[::-1])),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not failures, failures
    for reader in readers:
        assert reader.opened_state().source.wait_readahead(60)
    # Each range was fetched by one of them, the other waiting for its claim
    # (a claim judged dead by its lock would have been fetched twice).
    fetched = sum(reader.stats.fetched_bytes for reader in readers)
    assert fetched <= 1.1 * data_shards(local), (fetched, data_shards(local))
    # A forked process reads it too, with its own table of claims.
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports by its exit status
        try:
            child = sds_loader.BatchReader(uri, targets=TARGETS, cache_dir=cache)
            # Checked against the local copy: the parent's boto3 client is no
            # use after a fork.
            read_all(child, local, ALL[::3] + ALL[1::3])
            os._exit(0 if child.stats.fetched_bytes <= 4 else 3)
        except BaseException:  # noqa: BLE001
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the forked reader failed or fetched again"
    assert not leftovers(cache), leftovers(cache)
    assert usage(cache) == counted_bytes(cache)
    # Everything was stored: a new reader asks each shard for its version only.
    again = sds_loader.BatchReader(uri, targets=TARGETS, cache_dir=cache)
    read_all(again, uri, ALL, batch=16)
    assert again.stats.fetched_bytes == 4, again.stats


def test_a_temporary_file_of_a_dead_process_is_counted_and_swept(rclone_server, rclone_dataset, tmp_path):
    uri, local = rclone_dataset
    cache = tmp_path / "cache"
    first = sds_loader.BatchReader(uri, targets=TARGETS, cache_dir=cache)
    read_all(first, uri, ALL[:12])
    assert first.opened_state().source.wait_readahead(60)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    directory = next((cache / LAYOUT / "objects").rglob("identity")).parent
    orphan = directory / f".tmp-{dead.pid}-0-0"
    orphan.write_bytes(b"\0" * 300_000)
    old = time.time() - 60
    os.utime(orphan, (old, old))
    # A limit the next epoch must make room under: the eviction pass lists
    # the cache, counts the orphan and removes it.
    on_disk = counted_bytes(cache)
    reader = sds_loader.BatchReader(uri, targets=TARGETS, cache_dir=cache, cache_limit=on_disk + 100_000)
    read_all(reader, uri, ALL)
    assert reader.opened_state().source.wait_readahead(60)
    assert not orphan.exists(), "the dead process's temporary file was not swept"
    assert usage(cache) == counted_bytes(cache)
    assert usage(cache) <= on_disk + 100_000
