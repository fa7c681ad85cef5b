"""Argument edges tests/core/test_arguments.py does not reach.

Integers past int64 (as indices, thread counts, file limits), a thread count
the system cannot honour, and the reader's constructor refusing what is not a
dataset. Each costs a clear exception of the documented type, or is honoured.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from native_required import _native  # noqa: F401,E402 - a build without it fails the run (conftest.py)
from plain_records import COUNT, plain_record
from sds_factory import assert_batch, write_dataset

import sds_loader

FIELDS = ("iq", "taps")


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("plain-hostile-arguments")
    write_dataset(root, COUNT, plain_record, records_per_shard=4)
    return os.fspath(root)


@pytest.mark.parametrize("bad", [2**63, 2**64, 2**100, -(2**63) - 1, -(2**80)])
def test_python_ints_past_int64_are_out_of_range(plain, bad):
    reader = sds_loader.BatchReader(plain)
    with pytest.raises(IndexError, match=str(bad)):
        reader.read([0, bad])
    with pytest.raises(IndexError, match=str(bad)):
        reader[bad]


def test_int64_minimum_is_out_of_range(plain):
    with pytest.raises(IndexError, match=str(-(2**63))):
        sds_loader.BatchReader(plain).read(np.asarray([-(2**63)], dtype=np.int64))


@pytest.mark.parametrize(
    "indices",
    [
        np.arange(COUNT)[::3],
        np.asarray([1, 2, 9], dtype=">i8"),
        np.asarray([9, 1], dtype=np.uint16)[::-1],
        (i for i in (4, 4, 0)),
    ],
    ids=["strided", "big-endian", "reversed-view", "generator"],
)
def test_index_layouts_are_read_as_their_values(plain, indices):
    values = [int(i) for i in (indices if isinstance(indices, np.ndarray) else (4, 4, 0))]
    assert_batch(plain, sds_loader.BatchReader(plain).read(indices), values, FIELDS)


@pytest.mark.parametrize("threads", [2**31, 2**40, 10_000])
def test_huge_thread_counts_are_honoured_within_reason(plain, threads):
    reader = sds_loader.BatchReader(plain, threads=threads)
    assert reader.threads == threads
    assert_batch(plain, reader.read(range(COUNT)), list(range(COUNT)), FIELDS)
    reader.threads = 3
    reader.threads = threads
    assert_batch(plain, reader.read([9, 0]), [9, 0], FIELDS)


@pytest.mark.parametrize("limit", [2**32, 2**64, 2**70])
def test_huge_max_open_files_is_no_limit(plain, limit):
    reader = sds_loader.BatchReader(plain, max_open_files=limit)
    assert_batch(plain, reader.read(range(COUNT)), list(range(COUNT)), FIELDS)


@pytest.mark.parametrize("uri", [3, None, b"/tmp", ["/tmp"]], ids=["int", "none", "bytes", "list"])
def test_uri_of_the_wrong_type(uri):
    with pytest.raises(TypeError, match="uri"):
        sds_loader.BatchReader(uri)


def test_uri_that_is_no_dataset(tmp_path):
    with pytest.raises(FileNotFoundError):
        sds_loader.BatchReader(os.fspath(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError):
        sds_loader.BatchReader(os.fspath(tmp_path / "empty"))


def test_threads_the_system_refuses(plain):
    """With address space too small for another thread's stack, a read with
    many threads still completes on the threads it could start."""
    child = textwrap.dedent(
        f"""
        import resource, sys
        import numpy as np
        import sds_loader
        reader = sds_loader.BatchReader({plain!r}, fields=("iq",), threads=1)
        indices = np.arange({COUNT})
        expected = reader.read(indices)["iq"].copy()
        reader.threads = 64  # no thread started yet, so no stack cached to reuse
        out = {{"iq": np.empty_like(expected)}}
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * resource.getpagesize()
        # Room for 64 MiB of heap, not for another thread's 256 MiB stack.
        resource.setrlimit(resource.RLIMIT_AS, (used + (64 << 20), resource.RLIM_INFINITY))
        for _ in range(5):
            got = reader.read(indices, out=out)["iq"]
            assert np.array_equal(got, expected)
        print("ok")
        """
    )

    import resource  # POSIX only, as is the rest of this test

    def large_thread_stacks():
        # glibc sizes a new thread's stack by RLIMIT_STACK at start-up: with
        # 256 MiB stacks the child can leave ample heap room (so the
        # interpreter never runs out first) and still none for a thread.
        hard = resource.getrlimit(resource.RLIMIT_STACK)[1]
        if hard != resource.RLIM_INFINITY and hard < 256 << 20:
            return
        resource.setrlimit(resource.RLIMIT_STACK, (256 << 20, hard))

    run = subprocess.run(
        [sys.executable, "-c", child],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=large_thread_stacks,
    )
    assert run.returncode == 0, f"exit {run.returncode}:\n{run.stderr[-3000:]}"
    assert run.stdout.strip() == "ok"
