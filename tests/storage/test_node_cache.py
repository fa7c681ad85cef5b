"""The node cache (`cache_dir=`): later epochs read from local disk, every byte fetched once per node.

Against the real rclone S3 server, with real DataLoader workers and real
processes: a second epoch fetches nothing, a sparse first epoch no more than
without the cache; a damaged entry is dropped and fetched again, a replaced
object is never served, a process killed mid-fetch leaves nothing served or
waited for; a directory that cannot be used, or a disk that takes no more,
reads uncached with one warning;
the cache stays within its limit; and two processes of two workers each
sharing one cache fetch each byte once between them; and `sds-loader bench
--node-cache`, counted on the wire by benchmarks/remote_shaped.py, reports
later epochs fetching nothing. Every row is checked against signal_dataset's
reader.
"""

from __future__ import annotations

import functools
import json
import os
import random
import re
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from cache_readers import settled
from native_required import _native  # noqa: F401
from rclone_server import CREDENTIALS
from repo_paths import SUPPORT
from s3_fixtures import endpoint_options
from s3_server import FaultProxy
from sds_factory import assert_batch, capture, write_dataset
from signal_dataset.storage import S3ObjectStore

import sds_loader
from sds_loader.storage.cache_settings import CacheSettings, cache_settings, parse_cache_limit
from sds_loader.storage.s3_source import S3RangeSource

ALL = list(range(48))
FIELDS = ("samples",)
TARGETS = ("label",)


def shuffled(seed: int) -> list[int]:
    order = ALL[:]
    random.Random(seed).shuffle(order)
    return order


def read_epoch(reader: sds_loader.BatchReader, uri: str, order: list[int], batch: int = 8) -> None:
    for start in range(0, len(order), batch):
        indices = order[start : start + batch]
        assert_batch(uri, reader.read(indices), indices, FIELDS, TARGETS)


def entries(cache: Path) -> list[Path]:
    """The cache's entry files (named OFFSET-SIZE)."""
    return [p for p in cache.rglob("*") if re.fullmatch(r"[0-9a-f]{16}-[0-9a-f]{16}", p.name)]


def data_shards(local: str) -> int:
    return sum(p.stat().st_size for p in Path(local).rglob("*") if "/objects/data/" in p.as_posix())


def test_epochs_after_the_first_fetch_nothing(rclone_server, rclone_dataset, tmp_path):
    uri, local = rclone_dataset
    cache = tmp_path / "cache"
    reader = sds_loader.BatchReader(uri, targets=TARGETS, cache_dir=cache)
    read_epoch(reader, uri, shuffled(1))
    settled(reader)
    first = reader.stats.fetched_bytes
    # Everything fetched went to the cache: the data shards, once.
    assert reader.opened_state().source.cache_counters.stored_bytes == first
    assert first <= data_shards(local)
    read_epoch(reader, uri, shuffled(2), batch=16)
    assert reader.stats.fetched_bytes == first, "the second epoch fetched from the store"
    assert reader.stats.cache_hits > 0 and reader.stats.cache_hit_bytes > 0
    # A new process (here a new reader) asks each shard for one byte, its version and size.
    again = sds_loader.BatchReader(uri, targets=TARGETS, cache_dir=cache)
    read_epoch(again, uri, shuffled(3), batch=12)
    assert again.stats.fetched_bytes == 4, again.stats
    assert again.stats.cache_misses == 0


def test_a_sparse_epoch_fetches_no_more_than_without_the_cache(rclone_server, rclone_dataset, tmp_path):
    uri, _ = rclone_dataset
    sparse = [3, 17, 30, 31, 44]
    plain = sds_loader.BatchReader(uri, targets=TARGETS)
    assert_batch(uri, plain.read(sparse), sparse, FIELDS, TARGETS)
    cached = sds_loader.BatchReader(uri, targets=TARGETS, cache_dir=tmp_path / "cache")
    assert_batch(uri, cached.read(sparse), sparse, FIELDS, TARGETS)
    settled(cached)
    assert cached.stats.fetched_bytes <= plain.stats.fetched_bytes
    # Only what was read is cached: not the shards whole.
    assert sum(p.stat().st_size for p in entries(tmp_path / "cache")) < 2 * plain.stats.fetched_bytes


def test_a_damaged_entry_is_dropped_and_fetched_again(rclone_server, rclone_dataset, tmp_path):
    uri, _ = rclone_dataset
    cache = tmp_path / "cache"
    filler = sds_loader.BatchReader(uri, targets=TARGETS, cache_dir=cache)
    read_epoch(filler, uri, ALL, batch=48)
    settled(filler)
    found = sorted(entries(cache), key=lambda p: p.stat().st_size)
    flipped, cut = found[-1], found[-2]
    data = bytearray(flipped.read_bytes())
    data[len(data) // 2] ^= 0x01
    flipped.write_bytes(bytes(data))
    cut.write_bytes(cut.read_bytes()[:-100])
    reader = sds_loader.BatchReader(uri, targets=TARGETS, cache_dir=cache)
    read_epoch(reader, uri, ALL, batch=48)
    settled(reader)
    assert reader.opened_state().source.cache_counters.dropped == 2
    assert reader.stats.fetched_bytes > 4, "the damaged entries' bytes were not fetched again"
    # Fetched again, they are cached again.
    clean = sds_loader.BatchReader(uri, targets=TARGETS, cache_dir=cache)
    read_epoch(clean, uri, ALL, batch=48)
    assert clean.stats.fetched_bytes == 4
    assert clean.opened_state().source.cache_counters.dropped == 0


def test_a_replaced_object_is_never_served_from_the_cache(rclone_server, tmp_path):
    client = rclone_server.client()
    old, new = os.urandom(300_000), os.urandom(300_000)
    client.put_object(Bucket="datasets", Key="replaced/blob.bin", Body=old)
    settings = CacheSettings(directory=os.fspath(tmp_path / "cache"))
    uri = "s3://datasets/replaced/blob.bin"

    def read(cache: CacheSettings) -> bytes:
        source = S3RangeSource([uri], endpoint_options(rclone_server.url), cache=cache)
        buffer = bytearray(200_000)
        source.fetch([(0, 10_000, memoryview(buffer))])
        assert source.wait_readahead(60)
        return bytes(buffer)

    assert read(settings) == old[10_000:210_000]
    time.sleep(1.1)  # another modification time, whatever the server's ETag is made of
    client.put_object(Bucket="datasets", Key="replaced/blob.bin", Body=new)
    assert read(settings) == new[10_000:210_000]
    # The old version's bytes are gone from the cache, not kept beside the new.
    objects = [p for p in (tmp_path / "cache").rglob("identity")]
    assert len(objects) == 1


def test_a_process_killed_mid_fetch_leaves_nothing_served_or_waited_for(
    rclone_server, rclone_dataset, tmp_path
):
    uri, _ = rclone_dataset
    cache = tmp_path / "cache"
    proxy = FaultProxy(rclone_server.port)
    proxy.plan_sees_range = True
    proxy.stall_seconds = 60

    # Footers and file signatures pass; every record's bytes stall, so the
    # child dies holding its claims.
    def plan(n, method, path, range_=None):  # type: ignore[no-untyped-def]
        record = range_ and not range_.startswith("bytes=-") and range_ != "bytes=0-63"
        return "stall" if "/objects/data/" in path and record else "pass"

    proxy.plan = plan  # type: ignore[assignment]
    script = (
        "import sys, sds_loader\n"
        "from signal_dataset.storage import S3ObjectStore\n"
        "from s3_fixtures import endpoint_options\n"
        f"r = sds_loader.BatchReader({uri!r}, targets=('label',), cache_dir={os.fspath(cache)!r},\n"
        f"    object_store=S3ObjectStore(options=endpoint_options({proxy.url!r})))\n"
        "r.read(list(range(48)))\n"
    )
    env = dict(os.environ, **CREDENTIALS, PYTHONPATH=SUPPORT)
    child = subprocess.Popen([sys.executable, "-c", script], env=env)
    try:
        deadline = time.monotonic() + 60
        while not list(cache.rglob("*.fetching")):
            assert child.poll() is None and time.monotonic() < deadline, "the child claimed no range"
            time.sleep(0.05)
        child.kill()
        child.wait()
        proxy.plan = lambda n, method, path, range_=None: "pass"  # type: ignore[assignment]
        reader = sds_loader.BatchReader(
            uri,
            targets=TARGETS,
            cache_dir=cache,
            object_store=S3ObjectStore(options=endpoint_options(proxy.url)),
        )
        read_epoch(reader, uri, ALL, batch=48)
        counters = reader.opened_state().source.cache_counters
        assert counters.waits == 0, "a claim of the killed process was waited for"
        assert counters.dropped == 0
        assert not list(cache.rglob("*.fetching"))
    finally:
        child.kill()
        proxy.close()


def test_an_unusable_cache_dir_reads_uncached_with_one_warning(rclone_server, rclone_dataset, tmp_path):
    uri, _ = rclone_dataset
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reader = sds_loader.BatchReader(uri, targets=TARGETS, cache_dir=blocker / "cache")
        read_epoch(reader, uri, shuffled(4))
        read_epoch(reader, uri, shuffled(5))
    said = [w for w in caught if "node cache" in str(w.message)]
    assert len(said) == 1, [str(w.message) for w in caught]
    assert "a-file/cache" in str(said[0].message) and "without the node cache" in str(said[0].message)
    assert reader.stats.cache_hits == 0 and reader.stats.fetched_bytes > 0


def test_a_cache_that_cannot_take_more_reads_uncached_with_one_warning(
    rclone_server, rclone_dataset, tmp_path
):
    # A process whose files may not grow past 16 kB (RLIMIT_FSIZE, with
    # SIGXFSZ ignored) meets a full disk at its first entry.
    uri, local = rclone_dataset
    cache = os.fspath(tmp_path / "cache")
    script = (
        "import resource, signal, warnings, sds_loader\n"
        "from sds_factory import assert_batch\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (16 << 10, resource.RLIM_INFINITY))\n"
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        f"    r = sds_loader.BatchReader({uri!r}, targets=('label',), cache_dir={cache!r})\n"
        "    for start in range(0, 48, 8):\n"
        "        rows = list(range(start, start + 8))\n"
        f"        assert_batch({local!r}, r.read(rows), rows, ('samples',), ('label',))\n"
        "said = [str(w.message) for w in caught if 'node cache' in str(w.message)]\n"
        "assert len(said) == 1, said\n"
        "print(said[0])\n"
    )
    env = dict(os.environ, **CREDENTIALS, PYTHONPATH=SUPPORT)
    env["AWS_ENDPOINT_URL_S3"] = rclone_server.url
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "writing to the node cache failed" in done.stdout and "without the node cache" in done.stdout


def test_the_cache_stays_within_its_limit(rclone_server, rclone_dataset, tmp_path):
    uri, local = rclone_dataset
    cache = tmp_path / "cache"
    limit = data_shards(local) // 4
    reader = sds_loader.BatchReader(uri, targets=TARGETS, cache_dir=cache, cache_limit=limit)
    for epoch in range(2):
        order = shuffled(10 + epoch)
        for start in range(0, 48, 8):
            indices = order[start : start + 8]
            assert_batch(uri, reader.read(indices), indices, FIELDS, TARGETS)
            on_disk = sum(p.stat().st_size for p in entries(cache))
            assert on_disk <= limit, (on_disk, limit)
            assert reader.opened_state().source.cache_usage() <= limit
    assert reader.stats.cache_hit_bytes > 0, "what the cache kept was never read"
    assert reader.stats.fetched_bytes > data_shards(local), "the second epoch fetched nothing"


def test_processes_and_workers_sharing_a_cache_fetch_each_byte_once(rclone_server, tmp_path):
    import torch_required  # noqa: F401 - the processes read through DataLoader workers

    local = tmp_path / "local"
    write_dataset(local, 64, functools.partial(capture, samples=4096), records_per_shard=16)
    uri = rclone_server.upload_tree(local, "datasets", "shared-cache")
    proxy = FaultProxy(rclone_server.port)
    proxy.plan_sees_range = True
    asked: list[tuple[str, str]] = []

    def plan(n, method, path, range_=None):  # type: ignore[no-untyped-def]
        if method == "GET" and "/objects/data/" in path:
            asked.append((path.split("?")[0], range_ or ""))
        return "pass"

    proxy.plan = plan  # type: ignore[assignment]
    worker = os.path.join(SUPPORT, "node_cache_worker.py")
    env = dict(os.environ, **CREDENTIALS, PYTHONPATH=SUPPORT)
    cache = os.fspath(tmp_path / "cache")
    try:
        processes = [
            subprocess.Popen(
                [sys.executable, worker, uri, proxy.url, cache, os.fspath(local), str(seed)],
                env=env,
                stdout=subprocess.PIPE,
                text=True,
            )
            for seed in (1, 2)
        ]
        for process in processes:
            out, _ = process.communicate(timeout=300)
            assert process.returncode == 0 and "rows 64" in out
    finally:
        proxy.close()
    # Each byte of each shard was asked for once between the four workers
    # (one-byte version checks aside).
    sizes = {p.name: p.stat().st_size for p in local.rglob("*") if "/objects/data/" in p.as_posix()}
    fetched = 0
    for name, size in sizes.items():
        covered = bytearray(size)
        for path, range_ in asked:
            if not path.endswith("/" + name) or range_ == "bytes=-1":
                continue
            match = re.fullmatch(r"bytes=(\d*)-(\d*)", range_)
            assert match, range_
            first, last = match.groups()
            begin, end = (size - int(last), size) if not first else (int(first), int(last) + 1)
            begin = max(begin, 0)
            for k in range(begin, end):
                assert not covered[k], f"byte {k} of {name} was fetched twice ({range_} again)"
                covered[k] = 1
            fetched += end - begin
    assert fetched <= sum(sizes.values())


def test_cache_limit_takes_bytes_or_sizes_and_bad_values_are_named():
    assert parse_cache_limit(None) == 0
    assert parse_cache_limit(4096) == 4096
    assert parse_cache_limit("200GB") == 200 * 10**9
    assert parse_cache_limit("1.5 GiB") == 3 << 29
    assert parse_cache_limit("512mib") == 512 << 20
    with pytest.raises(ValueError, match="cache_limit '200 parsecs' is not a size"):
        parse_cache_limit("200 parsecs")
    with pytest.raises(ValueError, match="positive"):
        parse_cache_limit(0)
    with pytest.raises(ValueError, match="give cache_dir too"):
        cache_settings(None, "1GB")
    with pytest.raises(ValueError, match="local directory"):
        cache_settings("s3://bucket/cache", None)


def test_the_bench_reports_later_epochs_fetching_nothing(rclone_server, rclone_dataset, tmp_path, capsys):
    """Through benchmarks/remote_shaped.py, whose proxy counts the bytes on the wire too."""
    from remote_shaped import main as shaped_main

    from sds_loader.cli import main

    uri, _ = rclone_dataset
    out = tmp_path / "out"
    assert (
        shaped_main(
            [
                uri,
                "--endpoint",
                rclone_server.url,
                "--node-cache",
                os.fspath(tmp_path / "nc"),
                "--batch-size",
                "8",
                "--out",
                os.fspath(out),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "cache, epochs 2-4" in printed and "local disk" in printed
    assert "through a proxy that counts" in printed
    result = json.loads((out / "bench-node-cache.json").read_text())
    rows = {(row["order"], row["name"]): row for row in result["rows"]}
    for order in {order for order, _ in rows}:
        uncached, first = rows[order, "no cache"], rows[order, "cache, epoch 1"]
        assert first["fetched_bytes"] <= uncached["fetched_bytes"]
        assert rows[order, "cache, epochs 2-4"]["fetched_bytes"] == 0
        assert rows[order, "cache, epochs 2-4"]["wire_bytes"] == 0
    # What each cache held on disk after its last epoch: the records, once.
    assert all(re.search(r"directory held [1-9]", note) for note in result["notes"]), result["notes"]
    # The bench's caches are its own, made and removed under the directory given.
    assert not list((tmp_path / "nc").iterdir())
    assert main(["bench", uri, "--cache-dir", os.fspath(tmp_path / "data")]) != 0
    assert "pass --node-cache DIR" in capsys.readouterr().err


def test_announcements_into_the_cache_only_land_in_the_cache_not_in_memory(
    rclone_server, rclone_dataset, tmp_path
):
    # What the main process of a DataLoader with workers does: its
    # announcements serve the workers, which read the node cache.
    uri, _ = rclone_dataset
    cache = tmp_path / "cache"
    announcer = sds_loader.BatchReader(uri, targets=TARGETS, cache_dir=cache)
    announcer.read([0])  # open the dataset in this process
    announcer.will_need(ALL, into_cache=True)
    settled(announcer)
    assert announcer.opened_state().source.cache_counters.stored_bytes > 0
    # A worker's reader finds every record in the cache.
    worker = sds_loader.BatchReader(uri, targets=TARGETS, cache_dir=cache)
    read_epoch(worker, uri, shuffled(7), batch=16)
    assert worker.stats.fetched_bytes == 4, worker.stats
    # The announcer kept none of it in memory: its own reads come from the cache.
    read_epoch(announcer, uri, ALL, batch=16)
    assert announcer.opened_state().source.counters.ahead_hits == 0
    assert announcer.stats.cache_hit_bytes > 0
