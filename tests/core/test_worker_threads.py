"""The native decode threads: started once per reader and process, never per
read; made again in a forked child; fewer, not fatal, when the system
refuses one; and no lock of the reader's left held in a child by a fork.

Forks are made here with os.fork directly, since the point is what the
child inherits. Each child reports through its exit status and is killed if
it hangs, so that a deadlock fails the test instead of stalling the suite.
A child compares with batches its parent checked against signal_dataset:
signal_dataset's own reader is not safe to use in a forked child.
"""

from __future__ import annotations

import functools
import gc
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import traceback

import numpy as np
import pytest
import sds_factory
import signal_dataset as sds
from disk_pages import drop_cached_pages
from native_batches import native_read, open_native
from native_required import _native
from repo_paths import SUPPORT
from sds_factory import assert_matches_reference, write_dataset

import sds_loader

HANG_SECONDS = 30


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> str:
    root = str(tmp_path_factory.mktemp("threads") / "captures")
    write_dataset(root, 96, records_per_shard=32, writer_options=["zstd:1", "uncompressed", None])
    return root


def tasks() -> set[str]:
    return set(os.listdir("/proc/self/task"))


def in_child(body) -> int:
    """Runs body() in a forked child; its exit status (1 for an exception, -9 if it hung)."""
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            body()
            status = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(status)
    deadline = time.monotonic() + HANG_SECONDS
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return -9


def test_reads_reuse_the_same_threads(root):
    native, table = open_native(root)
    before = tasks()
    native_read(native, table, [5, 40, 70, 1], threads=3)
    started = tasks() - before
    assert len(started) == 2 and native.worker_threads == 2
    rng = np.random.default_rng(0)
    for size in [1, 2, 4, 16, 64] * 8:
        native_read(native, table, rng.choice(96, size).tolist(), threads=3)
    # No thread came or went: the same two helpers served every read.
    assert tasks() - before == started
    assert native.worker_threads == 2
    del native
    assert tasks() - before == set()


def test_a_forked_child_makes_its_own_threads(root):
    native, table = open_native(root)
    ordinals = np.random.default_rng(1).permutation(96)[:48].tolist()
    expected = native_read(native, table, ordinals, threads=3)
    assert native.worker_threads == 2

    def child():
        assert native.worker_threads == 0  # the parent's threads are not here
        for _ in range(3):
            got = native_read(native, table, ordinals, threads=3)
            for name, array in expected.items():
                assert np.array_equal(got[name], array), name
        assert native.worker_threads == 2

    assert in_child(child) == 0
    # The parent's threads were not disturbed by the fork.
    assert_matches_reference(
        root, native_read(native, table, ordinals, threads=3), ordinals, ["samples"], ["label"]
    )


def test_a_fork_while_a_footer_is_fetched_does_not_block_the_child(root):
    """A thread of the parent is inside a footer read (its source stalls) when
    the process forks; the child opens another shard at once."""
    parent = os.getpid()
    stalled, release = threading.Event(), threading.Event()

    class StallingSource:
        def __init__(self, paths):
            self.paths = paths

        def size(self, file):
            return os.path.getsize(self.paths[file])

        def name(self, file):
            return self.paths[file]

        def fetch(self, requests):
            if os.getpid() == parent and requests[0][0] == 0:
                stalled.set()
                release.wait(HANG_SECONDS)
            for file, offset, view in requests:
                with open(self.paths[file], "rb") as handle:
                    handle.seek(offset)
                    handle.readinto(view)

    table_paths = open_native(root)[1].paths
    native, table = open_native(root, source=StallingSource(list(table_paths)))
    expected = native_read(open_native(root)[0], table, [40, 80, 41], threads=2)
    assert_matches_reference(root, expected, [40, 80, 41], ["samples"], ["label"])
    opening = threading.Thread(target=lambda: native.probe(0, 0, 0))
    opening.start()
    try:
        assert stalled.wait(HANG_SECONDS)

        def child():
            batch = native_read(native, table, [40, 80, 41], threads=2)
            assert all(np.array_equal(batch[name], expected[name]) for name in expected)

        assert in_child(child) == 0
    finally:
        release.set()
        opening.join()


def test_a_fork_while_another_thread_holds_the_readers_lock(root):
    reader = sds_loader.BatchReader(root, threads=2, targets=("label",))
    expected = reader.read([3, 50])
    assert_matches_reference(root, expected, [3, 50], ["samples"], ["label"])
    held, release = threading.Event(), threading.Event()

    def hold():
        with reader._here._lock:  # the lock its PerProcess opens state under
            held.set()
            release.wait(HANG_SECONDS)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(HANG_SECONDS)

        def child():
            batch = reader.read([3, 50])
            assert all(np.array_equal(batch[name], expected[name]) for name in expected)

        assert in_child(child) == 0
    finally:
        release.set()
        holder.join()


def test_threads_the_system_refuses_mean_fewer_workers(root):
    """With no address space left for a thread's stack, a read at threads=8
    runs on the caller's thread alone and still returns every byte."""
    script = textwrap.dedent(
        f"""
        import resource, sys
        sys.path.insert(0, {SUPPORT!r})
        from native_batches import native_read, open_native
        from sds_factory import assert_matches_reference
        native, table = open_native({root!r})
        ordinals = list(range(0, 96, 3))
        native_read(native, table, ordinals, threads=1)  # scratch and imports, before the limit
        with open("/proc/self/status") as status:
            vm = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
        # A few MiB more than in use: less than one thread's 8 MiB stack.
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, ((vm + 6 * 1024) * 1024, hard))
        batch = native_read(native, table, ordinals, threads=8)
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
        assert native.worker_threads < 7, native.worker_threads
        assert_matches_reference({root!r}, batch, ordinals, ["samples"], ["label"])
        print("ok", native.worker_threads)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("ok"), done.stdout


def test_scratch_kept_between_reads_is_bounded(tmp_path):
    """After a batch of large records, idle scratch keeps no buffer of a
    record's size, and little in all, however many threads read it."""

    def large(ordinal: int) -> sds.Record:
        rng = np.random.default_rng(ordinal)
        data = rng.integers(0, 255, size=(12 << 20,), dtype=np.uint8)
        return sds.Record(
            id=f"large-{ordinal}", fields={"blob": sds_factory.field(data)}, metadata={"label": ordinal}
        )

    root = str(tmp_path / "large")
    write_dataset(root, 6, large, records_per_shard=3, writer_options="group_size:1,uncompressed")
    native, table = open_native(root)
    batch = native_read(native, table, [5, 0, 3, 1], threads=4)
    assert_matches_reference(root, batch, [5, 0, 3, 1], ["blob"], ["label"])
    assert native.kept_scratch_bytes <= 32 << 20
    assert native.kept_scratch_bytes < 12 << 20
    # Small records afterwards still reuse what is kept.
    assert_matches_reference(root, native_read(native, table, [2], threads=1), [2], ["blob"], ["label"])


def test_a_cold_batch_is_read_with_more_reads_in_flight_than_threads(disk_path):
    """Shards dropped from the page cache: the batch is fetched on the IO
    threads (which start for it) and comes out as it does warm. The shards
    live on the checkout's disk: a tmpfs folder never gives its pages up."""
    root = str(disk_path / "cold")
    write_dataset(root, 64, records_per_shard=16, writer_options="group_size:1")
    native, table = open_native(root)
    ordinals = np.random.default_rng(3).permutation(64)[:40].tolist()
    warm = native_read(native, table, ordinals, threads=1)
    assert_matches_reference(root, warm, ordinals, ["samples"], ["label"])
    # The reader maps the shards it reads warm, and the kernel keeps mapped
    # pages: let this one go, so that its pages can be dropped.
    del native
    gc.collect()
    for path in table.paths:
        drop_cached_pages(path)
    native, table = open_native(root)
    before = tasks()
    cold = native_read(native, table, ordinals, threads=1)
    assert len(tasks() - before) >= 1  # the IO threads, started for this batch
    for name, array in warm.items():
        assert np.array_equal(cold[name], array), name


def test_a_small_warm_batch_wakes_no_helper(tmp_path):
    """Waking a helper costs more than hashing and copying a few small
    uncompressed records, so such a batch stays on the caller's thread; a
    batch of the same shape with enough work per helper wakes one, at the
    same (default) threshold."""
    ordinals = [0, 9, 18, 27]  # one run in each shard
    small = str(tmp_path / "small")
    write_dataset(small, 32, records_per_shard=8, writer_options=["uncompressed"] * 4)
    native, table = _native_at_default_threshold(small)
    assert_matches_reference(
        small, native_read(native, table, ordinals, threads=2), ordinals, ["samples"], ["label"]
    )
    assert native.worker_threads == 0 and native.helped_batches == 0
    # Records of 512 KiB: the same four runs, now worth a second thread.
    large = str(tmp_path / "large")
    write_dataset(
        large,
        32,
        functools.partial(sds_factory.capture, samples=32768),
        records_per_shard=8,
        writer_options=["uncompressed"] * 4,
    )
    native, table = _native_at_default_threshold(large)
    assert_matches_reference(
        large, native_read(native, table, ordinals, threads=2), ordinals, ["samples"], ["label"]
    )
    assert native.worker_threads == 1
    # Lowering the threshold wakes one for the small batch too.
    native, table = _native_at_default_threshold(small)
    native.work_per_helper = 1
    assert_matches_reference(
        small, native_read(native, table, ordinals, threads=2), ordinals, ["samples"], ["label"]
    )
    assert native.worker_threads == 1


def _native_at_default_threshold(root: str):
    native, table = open_native(root)
    # open_native lifts the threshold for the other tests; put back a fresh ShardSet's.
    native.work_per_helper = _native.ShardSet([], True, 1).work_per_helper
    return native, table
