"""A rank starting over a shared node cache: waits for a start signal, reads, says how long it took.

Run as ``python cache_start_worker.py URI CACHE_DIR GO_FILE INDICES``
(endpoint and credentials from the environment): opens a reader of URI
with CACHE_DIR, waits until GO_FILE exists, so that several processes
begin at the same instant, reads INDICES (comma-separated) as one batch,
and prints ``seconds S`` for the read alone (its imports and opening are
not timed). Kept apart from the tests so that each process starts from
nothing: its own interpreter, its own native sources.
"""

from __future__ import annotations

import os
import sys
import time

from sds_factory import assert_batch

import sds_loader


def main(uri: str, cache_dir: str, go: str, indices: str) -> None:
    wanted = [int(i) for i in indices.split(",")]
    reader = sds_loader.BatchReader(uri, targets=("label",), cache_dir=cache_dir)
    while not os.path.exists(go):
        time.sleep(0.001)
    start = time.perf_counter()
    batch = reader.read(wanted)
    elapsed = time.perf_counter() - start
    assert_batch(uri, batch, wanted, ("samples",), ("label",))
    print(f"seconds {elapsed:.3f}")


if __name__ == "__main__":
    main(*sys.argv[1:5])
