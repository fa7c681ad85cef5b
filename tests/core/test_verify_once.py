"""verify_checksums="once": each chunk checked on its first read, trusted after while its file stays the same.

A file's identity is its device, inode, size, modification time and change
time: bytes of a chunk rewritten in place with the size and modification time
put back as they were (`touch -r`, `cp -p`, `rsync -t --inplace`) still
change its change time, so a "once" reader that has verified the chunk
verifies it again, as a reader verifying every read and a fresh "once"
reader do. A file replaced under its path, or rewritten with a new
modification time, is verified again. (Damage that no write through the file
system makes, a disk's own, goes unseen by a reader that has verified the
chunk: what the setting gives up.)
"""

from __future__ import annotations

import os
import shutil
from functools import partial

import numpy as np
import pytest
import signal_dataset as sds
from native_required import _native  # noqa: F401 - a build without it fails the run (conftest.py)
from sds_factory import CHUNK_HEADER_SIZE, assert_batch, capture, record_chunks, shard_ordinals, write_dataset

import sds_loader
from sds_loader import Window

RECORDS = 8
PER_SHARD = 4
FIELDS = ("samples",)


def _write(root, samples: int, options: str | None) -> str:
    write_dataset(
        root, RECORDS, partial(capture, samples=samples), records_per_shard=PER_SHARD, writer_options=options
    )
    return os.fspath(root)


# 64 KiB records are read straight into rows; 4 KiB ones are fetched with their run.
@pytest.fixture(scope="module", params=[4096, 256], ids=["64KiB", "4KiB"])
def samples(request) -> int:
    return int(request.param)


@pytest.fixture
def uncompressed(tmp_path, samples) -> str:
    return _write(tmp_path / "uncompressed", samples, "group_size:1,uncompressed")


def _first_shard(root: str) -> tuple[str, list[int]]:
    owners = shard_ordinals(root)
    shard = next(path for path, ordinals in owners.items() if 0 in ordinals)
    return shard, owners[shard]


def _damage_record(shard: str, local: int, *, keep_identity: bool) -> None:
    """Flips a byte in the middle of the data of the shard's record `local`, in place."""
    chunk = record_chunks(shard)[local]
    offset = chunk.physical(CHUNK_HEADER_SIZE + chunk.data_size // 2)
    before = os.stat(shard)
    with open(shard, "r+b") as file:
        file.seek(offset)
        byte = file.read(1)[0]
        file.seek(offset)
        file.write(bytes([byte ^ 0x40]))
    if keep_identity:
        os.utime(shard, ns=(before.st_atime_ns, before.st_mtime_ns))
    else:  # a visible rewrite, whatever the file system's timestamp granularity
        os.utime(shard, ns=(before.st_atime_ns, before.st_mtime_ns + 2_000_000_000))


def _corrupt(call) -> None:
    with pytest.raises(sds.CorruptDatasetError):
        call()


@pytest.mark.parametrize("value", [1, 0, None, "Once", "always", "true", np.True_])
def test_verify_checksums_takes_three_settings(uncompressed, value):
    with pytest.raises(ValueError, match=r'verify_checksums= must be True.*"once".*False'):
        sds_loader.BatchReader(uncompressed, verify_checksums=value)
    with pytest.raises(ValueError, match="verify_checksums="):
        _native.ShardSet([], value, 1)


def test_torch_dataset_checks_the_setting(uncompressed):
    torch_dataset = pytest.importorskip("sds_loader.torch")
    with pytest.raises(ValueError, match="verify_checksums="):
        torch_dataset.SDSTorchDataset(uncompressed, target=None, verify_checksums="sometimes")
    dataset = torch_dataset.SDSTorchDataset(uncompressed, target=None, verify_checksums="once")
    assert "verify_checksums='once'" in repr(dataset)
    assert dataset[3]["inputs"].numpy().tobytes() == sds.open(uncompressed)[3]["samples"].data.tobytes()


@pytest.mark.parametrize("options", [None, "group_size:1,uncompressed", "group_size:3,uncompressed"])
@pytest.mark.parametrize("threads", [1, 2])
def test_once_reads_match_signal_dataset(tmp_path, samples, options, threads):
    root = _write(tmp_path / "ds", samples, options)
    reader = sds_loader.BatchReader(
        root, fields=FIELDS, targets=("label",), extras=("id",), threads=threads, verify_checksums="once"
    )
    reference = sds.open(root)
    rng = np.random.default_rng(threads)
    for _ in range(3):  # the first epoch verifies, the later ones trust
        order = rng.permutation(RECORDS)
        for batch in np.array_split(order, 3):
            got = reader.read(batch)
            ids = got.pop("id")
            assert_batch(root, got, batch.tolist(), FIELDS, ("label",))
            assert list(ids) == [reference[int(i)].id for i in batch]


def test_once_windows_match_signal_dataset(uncompressed, samples):
    length = samples // 4
    reader = sds_loader.BatchReader(
        uncompressed, fields=FIELDS, window=Window("a1", length), verify_checksums="once"
    )
    reference = sds.open(uncompressed)
    for epoch in range(3):
        indices = np.arange(RECORDS)
        starts = reader.window_starts(indices, seed=1, epoch=epoch)
        got = reader.read(indices, starts=starts)["samples"]
        for row, (index, start) in enumerate(zip(indices, starts, strict=True)):
            expected = reference[int(index)]["samples"].data[:, start : start + length]
            assert got[row].tobytes() == expected.tobytes(), (epoch, index)


def test_a_rewrite_in_place_with_its_modification_time_restored_is_verified_again(uncompressed):
    # `touch -r`, `cp -p` or `rsync -t --inplace` put the modification time
    # back; the change time, which no user can set, still tells.
    shard, ordinals = _first_shard(uncompressed)
    once = sds_loader.BatchReader(uncompressed, fields=FIELDS, threads=1, verify_checksums="once")
    intact = once.read(ordinals)["samples"]
    _damage_record(shard, 1, keep_identity=True)
    _corrupt(lambda: once.read([ordinals[1]]))
    # Its other records read as before, once verified again.
    assert once.read([ordinals[2]])["samples"][0].tobytes() == intact[2].tobytes()

    # Verifying every read finds it, and so does a fresh "once" reader.
    _corrupt(lambda: sds_loader.BatchReader(uncompressed, fields=FIELDS).read([ordinals[1]]))
    fresh = sds_loader.BatchReader(uncompressed, fields=FIELDS, verify_checksums="once")
    _corrupt(lambda: fresh.read([ordinals[1]]))
    # A chunk that failed is not marked: the next read fails again.
    _corrupt(lambda: fresh.read([ordinals[1]]))
    assert fresh.read([ordinals[2]])["samples"][0].tobytes() == intact[2].tobytes()


def test_a_file_rewritten_with_a_new_modification_time_is_verified_again(uncompressed):
    shard, ordinals = _first_shard(uncompressed)
    once = sds_loader.BatchReader(uncompressed, fields=FIELDS, threads=1, verify_checksums="once")
    once.read(ordinals)
    _damage_record(shard, 1, keep_identity=False)
    _corrupt(lambda: once.read([ordinals[1]]))


def test_a_file_replaced_under_its_path_is_verified_again(uncompressed, tmp_path):
    shard, ordinals = _first_shard(uncompressed)
    other = next(o for o in range(RECORDS) if o not in ordinals)
    # One shard open at a time: reading the other shard closes this one, and
    # the next read of it opens whatever its path names then.
    once = sds_loader.BatchReader(
        uncompressed, fields=FIELDS, threads=1, max_open_files=1, verify_checksums="once"
    )
    intact = once.read(ordinals)["samples"]
    replacement = os.fspath(tmp_path / "replacement.arrayrecord")
    shutil.copyfile(shard, replacement)
    _damage_record(replacement, 1, keep_identity=False)
    os.utime(replacement, ns=(os.stat(shard).st_atime_ns, os.stat(shard).st_mtime_ns))
    os.replace(replacement, shard)  # a new inode, with the old one's size and times

    # While this reader still holds the old file open it reads the old
    # file, whose bytes it verified.
    assert once.read([ordinals[1]])["samples"][0].tobytes() == intact[1].tobytes()
    once.read([other])
    _corrupt(lambda: once.read([ordinals[1]]))
    assert once.read([ordinals[2]])["samples"][0].tobytes() == intact[2].tobytes()


def test_once_reads_from_object_storage_match_signal_dataset(rclone_dataset):
    """In object storage every request pins the object's version: marks need no file identity."""
    uri, local = rclone_dataset
    reader = sds_loader.BatchReader(uri, targets=("label",), verify_checksums="once")
    assert reader.native_unavailable_reason is None
    indices = list(range(len(reader)))[::-1]
    for _ in range(2):
        batch = reader.read(indices)
        assert_batch(local, batch, indices, FIELDS, ("label",))
    assert reader.stats.native_records == 2 * len(indices)


def test_ray_read_tasks_keep_the_setting(uncompressed):
    """read_sds's read tasks open their readers with the setting given, "once" included."""
    pytest.importorskip("ray.data", reason="the ray extra is not installed")
    from sds_loader.ray import SDSDatasource

    with pytest.raises(ValueError, match="verify_checksums="):
        SDSDatasource(uncompressed, fields=FIELDS, verify_checksums="yes")
    source = SDSDatasource(uncompressed, fields=FIELDS, verify_checksums="once")
    assert source._options.verify_checksums == "once"
