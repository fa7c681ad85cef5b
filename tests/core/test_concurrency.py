"""One reader shared across threads and across fork.

* Eight Python threads calling read() on one BatchReader at once each get
  exactly their own batch.
* read() releases the GIL while the native core works: another Python thread
  observes the output buffer half written, which it could not do if read()
  held the GIL from start to finish.
* After os.fork, parent and child both read correctly (the child reports
  through its exit status).
* Threads reading one reader over many more shards than it keeps open (so
  that files are evicted, unmapped and closed under the reads) get
  signal_dataset's bytes, and the reader's stats add up to exactly what was
  read, with the interpreter switching threads as often as it can.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from functools import partial

import numpy as np
import pytest
import signal_dataset as sds
from native_required import _native  # noqa: F401,E402 - a build without it fails the run (conftest.py)
from sds_factory import assert_matches_reference, capture, write_dataset

import sds_loader

FIELDS = ("samples",)
TARGETS = ("label", "snr_db")
RECORDS = 240
PER_SHARD = 40


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("concurrency")
    options = [None, "group_size:1,uncompressed", "group_size:1,snappy", "group_size:4,zstd:3", None, None]
    write_dataset(
        root, RECORDS, partial(capture, samples=512), records_per_shard=PER_SHARD, writer_options=options
    )
    return os.fspath(root)


@pytest.fixture(scope="module")
def expected(dataset) -> dict[str, np.ndarray]:
    reader = sds_loader.BatchReader(dataset, fields=FIELDS, targets=TARGETS, threads=1)
    batch = reader.read(range(RECORDS))
    assert_matches_reference(dataset, batch, range(RECORDS), FIELDS, TARGETS)
    return batch


def _matches(batch: dict[str, np.ndarray], indices: np.ndarray, expected: dict[str, np.ndarray]) -> bool:
    return all(np.array_equal(batch[name], expected[name][indices]) for name in (*FIELDS, *TARGETS))


def test_eight_threads_share_one_reader(dataset, expected):
    reader = sds_loader.BatchReader(dataset, fields=FIELDS, targets=TARGETS, threads=2, max_open_files=3)
    start = threading.Barrier(8)
    problems: list[str] = []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        start.wait()
        for round_ in range(25):
            indices = rng.integers(0, RECORDS, size=int(rng.integers(1, 48)))
            try:
                batch = reader.read(indices)
            except Exception as error:  # noqa: BLE001 - reported below
                problems.append(f"thread {seed} round {round_}: {type(error).__name__}: {error}")
                return
            if not _matches(batch, indices, expected):
                problems.append(f"thread {seed} round {round_}: wrong rows for {indices.tolist()}")
                return

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a reading thread hung"
    assert not problems, "\n".join(problems)
    assert reader.stats.fallback_records == 0


EVICTION_SHARDS = 32
EVICTION_PER_SHARD = 3


@pytest.fixture(scope="module")
def many_shards(tmp_path_factory) -> tuple[str, np.ndarray]:
    root = tmp_path_factory.mktemp("eviction")
    total = EVICTION_SHARDS * EVICTION_PER_SHARD
    options = [None, "group_size:1,uncompressed", "group_size:1,snappy", "group_size:2,brotli:5"]
    write_dataset(
        root,
        total,
        partial(capture, samples=256),
        records_per_shard=EVICTION_PER_SHARD,
        writer_options=[options[k % len(options)] for k in range(EVICTION_SHARDS)],
    )
    reference = sds.open(os.fspath(root))
    samples = np.stack([reference[i]["samples"].data for i in range(total)])
    return os.fspath(root), samples


def test_threads_reading_while_shards_are_evicted_count_exactly(many_shards):
    root, samples = many_shards
    total = EVICTION_SHARDS * EVICTION_PER_SHARD
    reader = sds_loader.BatchReader(root, fields=FIELDS, threads=2, max_open_files=2)
    workers, rounds = 6, 60
    start = threading.Barrier(workers)
    problems: list[str] = []
    read_records = [0] * workers

    def work(seed: int) -> None:
        rng = np.random.default_rng(100 + seed)
        start.wait()
        for round_ in range(rounds):
            # Several shards per batch, so that opening one evicts another's file.
            indices = rng.integers(0, total, size=int(rng.integers(1, 12)))
            try:
                batch = reader.read(indices)["samples"]
            except Exception as error:  # noqa: BLE001 - reported below
                problems.append(f"thread {seed} round {round_}: {type(error).__name__}: {error}")
                return
            if batch.tobytes() != samples[indices].tobytes():
                problems.append(f"thread {seed} round {round_}: wrong bytes for {indices.tolist()}")
                return
            read_records[seed] += indices.size

    interval = sys.getswitchinterval()
    # Switch threads as often as the interpreter allows: an unguarded
    # `stats.x += n` then loses updates.
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(seed,)) for seed in range(workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
    finally:
        sys.setswitchinterval(interval)
    assert not any(thread.is_alive() for thread in threads), "a reading thread hung"
    assert not problems, "\n".join(problems)
    assert reader.stats.batches == workers * rounds
    assert reader.stats.native_records == sum(read_records)
    assert reader.stats.fallback_records == 0


def test_read_releases_the_gil(tmp_path):
    # One big uncompressed shard: the native core writes rows in file order on
    # one thread, so a half-written output shows the read was in progress.
    root = tmp_path / "big"
    count = 3000
    write_dataset(root, count, partial(capture, samples=2048), writer_options="group_size:1,uncompressed")
    reader = sds_loader.BatchReader(root, fields=FIELDS, threads=1)
    indices = np.arange(count)
    shape = reader.schema.fields[0].shape
    out = {"samples": np.empty((count, *shape), np.complex64)}
    sentinel = np.complex64(np.nan)
    reading = threading.Event()
    stop = threading.Event()
    seen_half_written = []

    def observe() -> None:
        samples = out["samples"]
        while not stop.is_set():
            if reading.is_set() and not np.isnan(samples[0, 0, 0]) and np.isnan(samples[-1, 0, 0]):
                seen_half_written.append(True)
                return

    observer = threading.Thread(target=observe)
    observer.start()
    try:
        for _ in range(20):
            out["samples"].fill(sentinel)
            reading.set()
            batch = reader.read(indices, out=out)
            reading.clear()
            assert batch["samples"] is out["samples"]
            assert not np.isnan(out["samples"][-1, 0, 0])
            if seen_half_written:
                break
    finally:
        stop.set()
        observer.join()
    assert seen_half_written, "no Python thread ran while read() filled the batch: the GIL was held"
    assert_matches_reference(root, {"samples": out["samples"][::500]}, indices[::500].tolist(), FIELDS)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_parent_and_child_read_after_fork(dataset, expected):
    reader = sds_loader.BatchReader(dataset, fields=FIELDS, targets=TARGETS, threads=2, max_open_files=2)
    rng = np.random.default_rng(7)
    before = rng.integers(0, RECORDS, size=64)
    assert _matches(reader.read(before), before, expected)  # shards open, scratch pooled
    child_indices = rng.integers(0, RECORDS, size=96)
    parent_indices = rng.integers(0, RECORDS, size=96)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe and the exit status, never return
        code = 1
        try:
            os.close(read_end)
            ok = all(_matches(reader.read(child_indices), child_indices, expected) for _ in range(3))
            ok = ok and _matches(reader.read(before), before, expected)
            os.write(write_end, b"ok" if ok else b"wrong rows")
            code = 0 if ok else 2
        except BaseException as error:  # noqa: BLE001 - the child must exit whatever happens
            try:
                os.write(write_end, f"{type(error).__name__}: {error}".encode()[:4000])
            except OSError:
                pass
        finally:
            os._exit(code)
    os.close(write_end)
    try:
        for _ in range(3):
            assert _matches(reader.read(parent_indices), parent_indices, expected)
        deadline = time.monotonic() + 120
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                pytest.fail("the forked child hung")
            time.sleep(0.05)
        report = os.read(read_end, 4096).decode(errors="replace")
    finally:
        os.close(read_end)
    assert os.WIFEXITED(status), f"the child died: status {status}, {report}"
    assert os.WEXITSTATUS(status) == 0, report
    assert report == "ok", report
    assert _matches(reader.read(before), before, expected)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
