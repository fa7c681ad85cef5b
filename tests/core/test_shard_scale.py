"""Datasets of many shards: each footer is read once, and the open-file budget follows the file limit.

A reader keeps what every touched shard's footer and index say, apart from
the bounded set of open files and mappings; reopening an evicted shard must
not parse its footer again. The default budget follows the process's file
limit, so a dataset with more shards than a fixed budget reads without
running out of descriptors. Each scenario runs in a child process whose
file limit the test sets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from sds_factory import assert_matches_reference, write_dataset

import sds_loader

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
