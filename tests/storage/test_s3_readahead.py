"""`will_need` on object storage returns at once, never raises, and its reads stay exact.

Against a real S3 server behind a proxy: announcing records returns while the
store stalls (so no request waits on the caller's thread); a store that has
gone away raises nothing; and the records read later are signal_dataset's
bytes, served from what was fetched ahead, with no request of their own.
"""

from __future__ import annotations

import time

from native_required import _native  # noqa: E402, F401
from s3_fixtures import endpoint_options
from s3_server import FaultProxy
from sds_factory import assert_batch
from signal_dataset.storage import S3ObjectStore

import sds_loader

ALL = list(range(48))


def reader_through(proxy: FaultProxy, uri: str) -> sds_loader.BatchReader:
    return sds_loader.BatchReader(
        uri, targets=("label",), object_store=S3ObjectStore(options=endpoint_options(proxy.url))
    )


def test_will_need_returns_at_once_and_reads_ahead_off_the_callers_thread(rclone_server, rclone_dataset):
    uri, _ = rclone_dataset
    proxy = FaultProxy(rclone_server.port)
    try:
        reader = reader_through(proxy, uri)
        proxy.stall_seconds = 1.0
        # The store stalls the first shard requests for a second: a request
        # made on the caller's thread would hold will_need up that long.
        proxy.reset(lambda n, method, path: "stall" if "/objects/data/" in path and n < 4 else "pass")
        started = time.monotonic()
        assert reader.will_need(ALL) == 0
        elapsed = time.monotonic() - started
        assert elapsed < 0.5, f"will_need took {elapsed:.2f} s"
        assert reader.opened_state().readahead().wait_idle(60)
        seen = len(proxy.seen)
        source = reader.opened_state().source
        assert source is not None and source.counters.requests > 0
        # Every chunk is in the readahead cache: the read asks the store for nothing.
        assert_batch(uri, reader.read(ALL), ALL, ("samples",), ("label",))
        assert len(proxy.seen) == seen, "the read fetched again what was read ahead"
        assert source.counters.ahead_hits > 0
    finally:
        proxy.close()


def test_will_need_never_raises_when_the_store_is_gone(rclone_server, rclone_dataset):
    uri, _ = rclone_dataset
    proxy = FaultProxy(rclone_server.port)
    port = proxy.port
    reader = reader_through(proxy, uri)
    assert_batch(uri, reader.read([0]), [0], ("samples",), ("label",))
    proxy.close()  # nothing listens there now
    started = time.monotonic()
    assert reader.will_need(ALL) == 0
    assert reader.will_need([5, 17, 40]) == 0
    assert time.monotonic() - started < 0.5
    assert reader.opened_state().readahead().wait_idle(60)
    # The store comes back on the same address: reads are exact.
    proxy = FaultProxy(rclone_server.port, port=port)
    try:
        indices = [47, 5, 17, 40, 1]
        assert_batch(uri, reader.read(indices), indices, ("samples",), ("label",))
    finally:
        proxy.close()


def test_will_need_on_a_closed_reader_opens_nothing(rclone_server, rclone_dataset):
    uri, _ = rclone_dataset
    proxy = FaultProxy(rclone_server.port)
    try:
        reader = reader_through(proxy, uri)
        reader.close()
        proxy.reset()
        assert reader.will_need(ALL) == 0
        assert proxy.seen == [], "will_need on a closed reader reopened the dataset"
        assert_batch(uri, reader.read([3, 30]), [3, 30], ("samples",), ("label",))
    finally:
        proxy.close()


EXIT_WHILE_ANNOUNCING = """
import sys
import sds_loader
from signal_dataset.storage import S3ObjectStore, S3Options

store = S3ObjectStore(
    options=S3Options(endpoint_url=sys.argv[2], region_name="us-east-1", addressing_style="path")
)
reader = sds_loader.BatchReader(sys.argv[1], object_store=store)
reader.read([0])
for start in range(0, 48, 4):
    reader.will_need(range(start, start + 4))
# Exits at once: announcements are still being carried out, the reader open.
"""


def test_a_process_that_exits_while_announcing_exits_cleanly(rclone_server, rclone_dataset):
    """No abort at exit while announcements are under way (a Python thread in
    a native call at exit is ended through C++ frames, which aborts)."""
    import subprocess
    import sys

    uri, _ = rclone_dataset
    proxy = FaultProxy(rclone_server.port)
    try:
        proxy.stall_seconds = 0.5
        first: list[str] = []

        def stall_other_shards(n: int, method: str, path: str) -> str:
            # Record 0's shard answers; opening any other (an announcement's) stalls.
            if "/objects/data/" not in path:
                return "pass"
            if not first:
                first.append(path)
            return "pass" if path == first[0] else "stall"

        proxy.reset(stall_other_shards)
        done = subprocess.run(
            [sys.executable, "-c", EXIT_WHILE_ANNOUNCING, uri, proxy.url],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        proxy.close()
    assert done.returncode == 0, done.stderr[-2000:]
    assert "terminate" not in done.stderr, done.stderr[-2000:]


def test_the_sampler_announces_further_ahead_in_object_storage(rclone_dataset, tmp_path):
    """A round trip there is tens of milliseconds: four stretches ahead, not two."""
    import torch_required  # noqa: F401 - skips this test without torch

    import functools

    from sds_factory import capture, write_dataset

    from sds_loader.samplers import ShardAwareSampler

    uri, _ = rclone_dataset
    remote = ShardAwareSampler(sds_loader.BatchReader(uri), run_length=4, runs_mixed=3)
    assert remote.readahead == 4 * 4 * 3
    write_dataset(tmp_path / "local", 12, functools.partial(capture, samples=64), records_per_shard=6)
    local = ShardAwareSampler(sds_loader.BatchReader(str(tmp_path / "local")), run_length=4, runs_mixed=3)
    assert local.readahead == 2 * 4 * 3


def test_the_sampler_learns_the_runs_from_the_reader_without_a_request(
    rclone_server, rclone_dataset, monkeypatch
):
    import torch_required  # noqa: F401 - skips this test without torch

    from sds_loader.samplers import ShardAwareSampler, shard_aware

    uri, _ = rclone_dataset
    proxy = FaultProxy(rclone_server.port)
    try:
        reader = reader_through(proxy, uri)
        reader.read([0])
        proxy.reset()

        def no_second_open(*args, **kwargs):
            raise AssertionError("the sampler opened the dataset again")

        monkeypatch.setattr(shard_aware.sds, "open", no_second_open)
        sampler = ShardAwareSampler(reader, readahead=0, run_length=4, runs_mixed=2)
        assert proxy.seen == []
        assert sorted(sampler) == ALL
    finally:
        proxy.close()
