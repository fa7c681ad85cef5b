"""Datasets of many shards: a footer read once, a budget that follows the file limit, a shard kept small.

A reader keeps what every touched shard's footer and index say, apart from
the bounded set of open files and mappings; reopening an evicted shard must
not parse its footer again. The default budget follows the process's file
limit, so a dataset with more shards than a fixed budget reads without
running out of descriptors. Each scenario runs in a child process whose
file limit the test sets. What a reader keeps for every shard, touched or
not (its table, the native set's names and slots), is a hundred-odd bytes,
and the reader's own count of it says where each goes.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import weakref

import numpy as np
import pytest
import signal_dataset as sds
from native_required import _native
from sds_factory import assert_matches_reference, write_dataset

import sds_loader
from sds_loader.cli.bench.many_shards import RECORDS_PER_SHARD
from sds_loader.cli.bench.many_shards import write as write_linked_shards
from sds_loader.dataset import shard_table

SHARDS = 150
PER_SHARD = 4


@pytest.fixture(scope="module")
def many_shards(tmp_path_factory):
    root = tmp_path_factory.mktemp("scale") / "dataset"
    write_dataset(root, SHARDS * PER_SHARD, records_per_shard=PER_SHARD)
    return root


def test_each_footer_is_read_once_however_few_files_stay_open(many_shards):
    reader = sds_loader.BatchReader(many_shards, fields=("samples",), threads=1, max_open_files=4)
    rng = np.random.default_rng(7)
    touched: set[int] = set()
    for _ in range(3):
        order = rng.permutation(SHARDS * PER_SHARD)[:200]
        batch = reader.read(order)
        assert_matches_reference(many_shards, batch, order, ("samples",))
        touched |= {int(o) // PER_SHARD for o in order}
    native = reader.process_state().native
    # Far more shards than open files, most read in several batches: still
    # one footer each.
    assert len(touched) > 100
    assert reader.shards_indexed == len(touched)
    assert native.footer_reads == len(touched)
    # The kept indexes are small: a few hundred bytes a shard at this size.
    assert reader.index_bytes < 1024 * reader.shards_indexed


CHILD = r"""
import json, resource, sys
import numpy as np
import sds_loader
root, soft, hard, explicit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
kwargs = {} if explicit == "default" else {"max_open_files": int(explicit)}
reader = sds_loader.BatchReader(root, fields=("samples",), threads=1, **kwargs)
batch = reader.read(np.arange(len(reader)))
print(json.dumps({
    "soft": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
    "hard": resource.getrlimit(resource.RLIMIT_NOFILE)[1],
    "budget": reader.max_open_files,
    "indexed": reader.shards_indexed,
    "footers": reader.process_state().native.footer_reads,
    "checksum": float(np.abs(batch["samples"]).sum()),
}))
"""


def run_child(root, soft: int, hard: int, explicit: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", CHILD, os.fspath(root), str(soft), str(hard), explicit],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_default_budget_follows_the_raised_file_limit(many_shards):
    # A soft limit of 64 would leave a fixed budget of 64 files: raised to
    # the hard limit, half of it holds every shard of the dataset.
    run = run_child(many_shards, 64, 512, "default")
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout)
    assert result["soft"] == 512 and result["hard"] == 512  # only the soft limit moves
    assert result["budget"] == 256
    assert result["indexed"] == SHARDS and result["footers"] == SHARDS


def test_more_shards_than_the_file_limit_read_without_running_out(many_shards):
    # The hard limit is below the shard count: the budget (half of it)
    # cycles open files, and every record still reads.
    run = run_child(many_shards, 100, 100, "default")
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout)
    assert result["budget"] == 50 and result["indexed"] == SHARDS and result["footers"] == SHARDS
    reference = run_child(many_shards, 1024, 1024, "1024")
    assert reference.returncode == 0, reference.stderr[-3000:]
    assert json.loads(reference.stdout)["checksum"] == result["checksum"]


# What a reader keeps per shard of the dataset, touched or not: heap bytes
# (malloc's own count, not resident pages, so that neither page granularity
# nor memory the allocator has yet to hand back blurs it) after opening a
# reader and reading a first batch, in a fresh interpreter that has already
# imported everything it uses. The batch reads one record of each of the
# first 256 shards, so that both datasets touch, and index, as many.
HEAP_CHILD = r"""
import ctypes, gc, json, sys
import numpy as np
import signal_dataset
import sds_loader

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

mallinfo2 = getattr(ctypes.CDLL(None), "mallinfo2", None)
if mallinfo2 is None:
    print(json.dumps(None))
    raise SystemExit
mallinfo2.restype = MallInfo2

def heap():
    gc.collect()
    info = mallinfo2()
    return info.uordblks + info.hblkhd  # in use: small chunks, and those mapped whole

before = heap()
reader = sds_loader.BatchReader(sys.argv[1], threads=1)
reader.read(np.arange(256) * int(sys.argv[2]))
kept = heap() - before
state = reader.process_state()
print(json.dumps({"heap": kept, "accounted": state.table.held_bytes + state.native.held_bytes}))
"""

#: Shard counts of the two datasets the cost of a shard is the slope between.
FEWER, MORE = 500, 3_000
#: Heap bytes a shard may cost, its shard table and the native set's slots
#: together: 85 (the table's 64, a cache slot of 17 and an open-file slot
#: number of 4). 0.4.0 kept 121, copying the digests into the set; a round
#: after it kept 177: the set copied the shard table too, and held a 32-byte
#: open-file entry for every shard.
BYTES_PER_SHARD = 110
#: Heap bytes a shard may cost beyond what the table and the set account for.
UNACCOUNTED_PER_SHARD = 16


@pytest.fixture(scope="module")
def shard_counts(tmp_path_factory):
    roots = {}
    for shards in (FEWER, MORE):
        roots[shards] = tmp_path_factory.mktemp(f"shards-{shards}")
        write_linked_shards(roots[shards], shards)
    return roots


def kept_per_shard(roots) -> dict[str, float]:
    """Heap bytes kept, and bytes the reader accounts for, per shard of the dataset."""
    kept = {}
    for shards, root in roots.items():
        run = subprocess.run(
            [sys.executable, "-c", HEAP_CHILD, os.fspath(root), str(RECORDS_PER_SHARD)],
            capture_output=True,
            text=True,
            timeout=300,
            # mallinfo2 counts the main arena alone: with one arena, what a
            # thread allocates is counted wherever the scheduler ran it.
            env={**os.environ, "MALLOC_ARENA_MAX": "1"},
        )
        assert run.returncode == 0, run.stderr[-3000:]
        kept[shards] = json.loads(run.stdout)
        if kept[shards] is None:
            pytest.skip("this C library has no mallinfo2 to count heap bytes with")
    return {key: (kept[MORE][key] - kept[FEWER][key]) / (MORE - FEWER) for key in ("heap", "accounted")}


def test_a_shard_costs_its_table_and_a_few_bytes_all_accounted_for(shard_counts):
    per_shard = kept_per_shard(shard_counts)
    # What every shard costs however few are read: the table's columns and
    # names, the set's slots. A structure sized by the shard count that is
    # not borrowed from the table shows here.
    assert per_shard["heap"] <= BYTES_PER_SHARD, per_shard
    # And held_bytes says where it goes: nothing kept per shard escapes it.
    assert per_shard["heap"] <= per_shard["accounted"] + UNACCOUNTED_PER_SHARD, per_shard


def test_what_a_set_borrows_lives_as_long_as_the_set(many_shards):
    # The set reads the table's digests, sizes and runs where the table keeps
    # them: they outlive every other reference to them, and no more.
    table = shard_table(sds.open(str(many_shards)))
    assert table.paths.compact and table.sizes is not None
    digests, sizes = table.paths.digests.copy(), table.sizes.copy()
    runs = [table.starts.copy(), table.skips.copy(), table.files.copy()]
    borrowed = [weakref.ref(array) for array in (digests, sizes, *runs)]
    native = _native.ShardSet(
        [], True, 4, sizes=sizes, root=table.root, prefix=table.paths.prefix, digests=digests
    )
    native.keep_runs(*runs)
    del digests, sizes, runs
    gc.collect()
    assert all(ref() is not None for ref in borrowed)
    # Shard 0 is named by its borrowed digest and checked against its borrowed size.
    assert native.probe(0, 0, 0) is not None
    del native
    gc.collect()
    assert all(ref() is None for ref in borrowed)
