"""A sweep of damage across whole shards, for every way a shard can be stored.

For a small shard of each compression (zstd, the default; uncompressed;
snappy; brotli; zstd with four records per chunk), one bit is flipped at each
of 150 offsets sampled across the whole file with a fixed seed, and the file
is truncated at every chunk boundary. After each damage every record is read
alone and all of them together. Each read must either raise
`signal_dataset.CorruptDatasetError` or return exactly the intact record:
never other bytes, never another exception, never a crash or a hang. A
refusal of a record signal_dataset still reads (checked in the same child)
must be one of the named, documented classes in stricter.py, so a reader
that refuses too much fails too.

tests/core/test_corruption.py aims single, named damages at known places; this
file samples everywhere, including places nobody thought to aim at.

Each shard's sweep runs in a child process (this file, run as a script) under
a timeout, so that a crash or a hang fails the test instead of the run.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from functools import partial

import pytest
from native_required import _native  # noqa: F401,E402 - a build without it fails the run (conftest.py)
from repo_paths import SUPPORT

RECORDS = 8
SAMPLES = 512  # 2 x 512 complex64: 8 KiB a record, so the shard spans block headers
FLIPS = 150
SEED = 20240611
KINDS = {
    "zstd": None,
    "uncompressed": "group_size:1,uncompressed",
    "snappy": "group_size:1,snappy",
    "brotli": "group_size:1,brotli:6",
    "group4-zstd": "group_size:4,zstd:3",
}
FIELDS = ("samples",)
TARGETS = ("label",)


def _sweep(pristine: str, work: str, kind: str) -> dict:
    """The child's side: damage, read, compare. Returns counts and failures."""
    import signal_dataset as sds
    from sds_factory import data_shards, read_chunks
    from stricter import stricter_class

    import sds_loader

    reference = sds.open(pristine)
    expected = {
        i: (reference[i]["samples"].data.tobytes(), int(reference[i].metadata["label"]))
        for i in range(RECORDS)
    }
    (shard,) = data_shards(pristine)
    with open(shard, "rb") as file:
        intact = file.read()
    root = os.path.join(work, "copy")
    shutil.copytree(pristine, root)
    (target,) = data_shards(root)

    damages: list[tuple[str, bytes]] = []
    rng = random.Random(f"{SEED}-{kind}")
    for offset in sorted(rng.sample(range(len(intact)), FLIPS)):
        bit = rng.randrange(8)
        damaged = bytearray(intact)
        damaged[offset] ^= 1 << bit
        damages.append((f"flip bit {bit} at {offset}", bytes(damaged)))
    boundaries = sorted(
        {chunk.begin for chunk in read_chunks(shard)} | {chunk.end for chunk in read_chunks(shard)}
    )
    for boundary in boundaries:
        if boundary < len(intact):
            damages.append((f"truncate at {boundary}", intact[:boundary]))

    counts = {"raised": 0, "equal": 0, "damages": len(damages), "stricter": 0}
    failures: list[str] = []
    #: Per damage, the records signal_dataset reads intact (refusals: its
    #: array_record's RuntimeError, its codecs' ValidationError, CorruptDatasetError).
    reference_reads: set[int] = set()

    def signal_dataset_reads() -> set[int]:
        try:
            dataset = sds.open(root)
        except (RuntimeError, sds.errors.ValidationError, sds.CorruptDatasetError):
            return set()
        readable = set()
        for ordinal in range(RECORDS):
            try:
                record = dataset[ordinal]
            except (RuntimeError, sds.errors.ValidationError, sds.CorruptDatasetError):
                continue
            if record["samples"].data.tobytes() == expected[ordinal][0]:
                readable.add(ordinal)
        return readable

    def check(what: str, read, ordinals: list[int]) -> None:
        try:
            batch = read()
        except sds.CorruptDatasetError as error:
            counts["raised"] += 1
            if os.path.basename(target) not in str(error):
                failures.append(f"{what}: error does not name the shard: {error}")
            if set(ordinals) <= reference_reads:
                # signal_dataset reads every record asked for: only a named class may refuse them.
                counts["stricter"] += 1
                if stricter_class(error) is None:
                    failures.append(f"{what}: refused, where signal_dataset reads it intact: {error}")
            return
        except Exception as error:  # noqa: BLE001 - any other exception is the failure
            failures.append(f"{what}: {type(error).__name__}: {error}")
            return
        for row, ordinal in enumerate(ordinals):
            samples, label = expected[ordinal]
            got = batch["samples"][row]
            if got.tobytes() != samples or int(batch["label"][row]) != label:
                failures.append(f"{what}: record {ordinal} came back with different bytes")
                return
        counts["equal"] += 1

    everything = list(range(RECORDS))
    for name, data in damages:
        with open(target, "wb") as file:
            file.write(data)
        reference_reads = signal_dataset_reads()
        reader = sds_loader.BatchReader(root, fields=FIELDS, targets=TARGETS, threads=2)
        for ordinal in everything:
            check(f"{name}, record {ordinal}", partial(reader.read, [ordinal]), [ordinal])
        fresh = sds_loader.BatchReader(root, fields=FIELDS, targets=TARGETS, threads=2)
        check(f"{name}, whole batch", partial(fresh.read, everything[::-1]), everything[::-1])
        check(
            f"{name}, one record", partial(lambda r, o: {k: v[None] for k, v in r[o].items()}, fresh, 3), [3]
        )
        if len(failures) > 20:
            break
    return {"counts": counts, "failures": failures}


@pytest.fixture(scope="module", params=list(KINDS))
def pristine(request, tmp_path_factory) -> tuple[str, str]:
    from sds_factory import capture, write_dataset

    root = tmp_path_factory.mktemp(f"sweep-{request.param}")
    write_dataset(root, RECORDS, partial(capture, samples=SAMPLES), writer_options=KINDS[request.param])
    return os.fspath(root), request.param


def test_damage_anywhere_raises_or_reads_intact(pristine, tmp_path):
    root, kind = pristine
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SUPPORT, os.environ.get("PYTHONPATH", "")]))
    try:
        child = subprocess.run(
            [sys.executable, __file__, root, os.fspath(tmp_path), kind],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
    except subprocess.TimeoutExpired as expired:
        pytest.fail(f"the {kind} sweep hung: {expired.stderr}")
    assert child.returncode == 0, f"the {kind} sweep died with {child.returncode}:\n{child.stderr[-4000:]}"
    result = json.loads(child.stdout.strip().splitlines()[-1])
    assert not result["failures"], "\n".join(result["failures"])
    counts = result["counts"]
    # The sweep really damaged records, and really left some damage harmless.
    assert counts["raised"] > 0 and counts["equal"] > 0, counts
    assert counts["damages"] > FLIPS, counts


if __name__ == "__main__":
    print(json.dumps(_sweep(*sys.argv[1:4])))
