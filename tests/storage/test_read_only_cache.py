"""A node cache filled once and then shared read-only is read: its entries served, nothing written.

A cache warmed by one job and mounted read-only into the containers of
others is a common layout. A process given such a directory serves what it
holds (hits, no bytes fetched for them), checks it as ever, and writes,
claims and evicts nothing. The directory is made read-only the way this
machine allows, both where it can: a read-only bind mount in a private
mount namespace (`unshare -m`, as root: writes fail with EROFS), and the
file modes (`chmod -R u-w`: writes fail with EACCES; as root, whom modes do
not stop, the reading process runs without the capabilities that override
them, `setpriv --bounding-set=-dac_override,-dac_read_search`). Against the
real rclone S3 server, every row checked against signal_dataset's reader.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cache_readers import settled
from native_required import _native  # noqa: F401
from repo_paths import SUPPORT
from s3_fixtures import endpoint_options
from sds_factory import assert_batch
from signal_dataset.storage import S3ObjectStore

import sds_loader

FIELDS = ("samples",)
TARGETS = ("label",)
SPREAD = [0, 5, 12, 17, 24, 29, 36, 41]

#: Reads SPREAD through a node cache in a process of its own and prints what it saw.
READER = """
import hashlib, json, os, sys, warnings
sys.path.insert(0, {support!r})
from s3_fixtures import endpoint_options
from signal_dataset.storage import S3ObjectStore
import sds_loader
url, uri, cache = sys.argv[1:4]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    store = S3ObjectStore(options=endpoint_options(url))
    reader = sds_loader.BatchReader(uri, fields=("samples",), targets=("label",), object_store=store,
                                    cache_dir=cache)
    batch = reader.read({spread!r})
    stats = reader.stats
    reader.close()
print(json.dumps(dict(
    rows=hashlib.sha256(batch["samples"].tobytes() + batch["label"].tobytes()).hexdigest(),
    hits=stats.cache_hits, misses=stats.cache_misses, fetched=stats.fetched_bytes,
    warnings=[str(w.message) for w in caught])))
"""


def _bind_mount_works(directory: Path) -> bool:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    probe = subprocess.run(
        [
            "unshare",
            "-m",
            "sh",
            "-c",
            'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" "$0"',
            directory,
        ],
        capture_output=True,
    )
    return probe.returncode == 0


#: Runs a command as root without the capabilities that let root write where file modes forbid it.
WITHOUT_OVERRIDE = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]


@pytest.fixture(params=["mount", "modes"])
def read_only(request, tmp_path) -> Iterator[tuple[Path, list[str], bool]]:
    """(a cache directory, the command prefix that runs a process seeing it read-only, whether
    its modes must be taken away first)."""
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    root = os.geteuid() == 0
    if request.param == "mount":
        if not root or not _bind_mount_works(cache):
            pytest.skip("a read-only bind mount needs root and unshare -m, which this machine does not allow")
        script = 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" "$0" && exec "$@"'
        yield cache, ["unshare", "-m", "sh", "-c", script, os.fspath(cache)], False
        return
    if root and shutil.which("setpriv") is None:
        pytest.skip("running as root, whom file modes do not stop, and setpriv is missing")
    yield cache, WITHOUT_OVERRIDE if root else [], True
    for path in [cache, *cache.rglob("*")]:  # writable again, to be removed
        if path.is_dir():
            path.chmod(path.stat().st_mode | stat.S_IWUSR)


def _take_write_modes(cache: Path) -> None:
    """No directory of the cache may be written by its owner (nor by anyone)."""
    for path in [cache, *cache.rglob("*")]:
        if path.is_dir():
            path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _tree(cache: Path) -> dict[str, tuple[int, int]]:
    return {
        os.fspath(path.relative_to(cache)): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in cache.rglob("*")
        if path.is_file()
    }


def test_a_read_only_cache_serves_what_it_holds(rclone_server, rclone_dataset, read_only):
    uri, _ = rclone_dataset
    cache, prefix, modes = read_only
    store = S3ObjectStore(options=endpoint_options(rclone_server.url))
    warm = settled(
        sds_loader.BatchReader(uri, fields=FIELDS, targets=TARGETS, object_store=store, cache_dir=cache)
    )
    expected = warm.read(SPREAD)
    assert_batch(uri, expected, SPREAD, FIELDS, TARGETS)
    settled(warm).close()
    before = _tree(cache)
    if modes:
        _take_write_modes(cache)
    code = READER.format(support=os.fspath(SUPPORT), spread=SPREAD)
    done = subprocess.run(
        [*prefix, sys.executable, "-c", code, rclone_server.url, uri, os.fspath(cache)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    rows = hashlib.sha256(expected["samples"].tobytes() + expected["label"].tobytes()).hexdigest()
    assert seen["rows"] == rows
    # A read-only mount is warned of once (one cause, one warning), and the
    # warning says the cache is read; taken write modes are not a mount and say nothing.
    if prefix and prefix[0] == "unshare":
        assert len(seen["warnings"]) == 1, seen["warnings"]
        assert "read-only file system" in seen["warnings"][0]
        assert "what it holds is read" in seen["warnings"][0]
    else:
        assert seen["warnings"] == []
    # Every range the batch needed came from the cache: its footers and its records.
    assert seen["misses"] == 0 and seen["hits"] >= len(SPREAD)
    assert seen["fetched"] < 64 * len(SPREAD)  # a one-byte probe a shard, no record
    assert _tree(cache) == before  # nothing written, touched or removed
