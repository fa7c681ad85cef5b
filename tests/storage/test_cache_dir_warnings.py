"""A cache_dir that cannot hold a cache is one cause, and gets one warning.

The node cache (reads from object storage) and the shard tables kept beside
it share one directory. When that directory is a file, lies below a file, or
sits on a read-only mount, a reader gives one warning for it, naming the
directory and the cause, and saying what becomes of reads and of shard
tables; no second warning in another voice follows, however many batches
are read. Against the real rclone S3 server and a local dataset, every row is
checked against signal_dataset's reader.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
from cache_readers import settled
from native_required import _native  # noqa: F401
from rclone_server import CREDENTIALS
from repo_paths import SUPPORT
from sds_factory import assert_batch, write_dataset

import sds_loader
from sds_loader import dataset as addressing

ALL = list(range(48))
FIELDS = ("samples",)
TARGETS = ("label",)


def read_twice(uri: str, reference: str, cache: Path) -> tuple[list[str], sds_loader.BatchReader]:
    """Every warning a fresh reader of `uri` gives over two passes, and the reader."""
    with addressing._TABLES_LOCK:
        addressing._TABLES.clear()  # so that the shard tables are looked for in the cache
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reader = sds_loader.BatchReader(uri, targets=TARGETS, cache_dir=cache)
        for _ in range(2):
            for start in range(0, len(ALL), 12):
                indices = ALL[start : start + 12]
                assert_batch(reference, reader.read(indices), indices, FIELDS, TARGETS)
    return [str(w.message) for w in caught], reader


def unusable(tmp_path: Path, cause: str) -> Path:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    return blocker if cause == "a file" else blocker / "cache"


def cause_said(cache: Path, cause: str) -> str:
    if cause == "a file":
        return f"{cache} is a file, not a directory"
    return f"{cache} lies below {cache.parent}, which is a file, not a directory"


@pytest.mark.parametrize("cause", ["a file", "below a file"])
def test_a_cache_dir_that_is_or_lies_below_a_file_gets_one_warning(
    rclone_server, rclone_dataset, tmp_path, cause
):
    uri, local = rclone_dataset
    cache = unusable(tmp_path, cause)
    said, reader = read_twice(uri, local, cache)
    assert len(said) == 1, said
    assert cause_said(cache, cause) in said[0], said[0]
    assert "reads go to the store without the node cache" in said[0], said[0]
    assert "shard tables are read from the dataset's manifests" in said[0], said[0]
    assert reader.stats.cache_hits == 0 and reader.stats.fetched_bytes > 0


@pytest.mark.parametrize("cause", ["a file", "below a file"])
def test_a_local_datasets_warning_speaks_of_its_shard_tables_alone(tmp_path, cause):
    local = tmp_path / "ds"
    write_dataset(local, 48, records_per_shard=12)
    cache = unusable(tmp_path, cause)
    said, _ = read_twice(os.fspath(local), os.fspath(local), cache)
    assert len(said) == 1, said
    assert cause_said(cache, cause) in said[0], said[0]
    assert "shard tables are read from the dataset's manifests" in said[0], said[0]
    assert "store" not in said[0] and "node cache is not used" not in said[0], said[0]


def test_a_cache_dir_on_a_read_only_mount_gets_one_warning(rclone_server, rclone_dataset, tmp_path):
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare(1) to mount a directory read-only in a namespace of its own")
    uri, local = rclone_dataset
    cache = tmp_path / "cache"
    settled(read_twice(uri, local, cache)[1])  # filled: entries and shard tables
    program = textwrap.dedent(
        f"""
        import json, warnings, sds_loader
        from sds_factory import assert_batch
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            reader = sds_loader.BatchReader({uri!r}, targets=("label",), cache_dir={os.fspath(cache)!r})
            for _ in range(2):
                for start in range(0, 48, 12):
                    rows = list(range(start, start + 12))
                    assert_batch({local!r}, reader.read(rows), rows, ("samples",), ("label",))
        print(json.dumps([str(w.message) for w in caught]))
        """
    )
    mount = (
        f'mount --bind "{cache}" "{cache}" && mount -o remount,bind,ro "{cache}" && '
        f'exec "{sys.executable}" -c "$0"'
    )
    env = dict(os.environ, **CREDENTIALS, PYTHONPATH=SUPPORT, AWS_ENDPOINT_URL_S3=rclone_server.url)
    done = subprocess.run(
        ["unshare", "--map-root-user", "--mount", "sh", "-c", mount, program],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0 and "mount" in done.stderr and "Traceback" not in done.stderr:
        pytest.skip(f"cannot mount a directory read-only here: {done.stderr.strip()[-300:]}")
    assert done.returncode == 0, done.stderr[-3000:]

    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(said) == 1, said
    assert f"{cache} is on a read-only file system" in said[0], said[0]
    assert "bytes fetched from the store are not added to it" in said[0], said[0]
    assert "shard tables" in said[0], said[0]
    # What becomes of the entries it holds is the node cache's to decide; the warning does not say
    # that reads go without it.
    assert "without the node cache" not in said[0], said[0]
