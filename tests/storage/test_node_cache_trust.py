"""The node cache trusts nothing it finds in its directory.

The cache lives where other processes, and other users, can reach it. Against
the real rclone S3 server: a link planted in the cache's layout is removed,
never followed (a file or directory it points at is left untouched and
nothing is written through it); a FIFO planted as an entry, an identity or
the usage file never blocks a read; a cache directory another user owns or
may write is refused with one warning naming it and the fix, and reads go
uncached; an object whose store sends no ETag is not cached, so a
replacement of the same size within the same second is read anew; bytes of
an entry damaged under an open reader are fetched again, never raised as a
corrupt shard. Every row is checked against signal_dataset's reader.
"""

from __future__ import annotations

import os
import re
import threading
import warnings
from pathlib import Path

import pytest
from cache_readers import settled
from native_required import _native  # noqa: F401
from s3_fixtures import endpoint_options
from s3_server import FaultProxy
from sds_factory import assert_batch

import sds_loader
from sds_loader.storage.cache_settings import CacheSettings
from sds_loader.storage.s3_source import S3RangeSource

ALL = list(range(48))
FIELDS = ("samples",)
TARGETS = ("label",)
LAYOUT = "sds-loader-cache-v1"


def read_all(reader: sds_loader.BatchReader, uri: str, batch: int = 12) -> None:
    for start in range(0, 48, batch):
        indices = ALL[start : start + batch]
        assert_batch(uri, reader.read(indices), indices, FIELDS, TARGETS)


def filled(uri: str, cache: Path) -> sds_loader.BatchReader:
    reader = sds_loader.BatchReader(uri, targets=TARGETS, cache_dir=cache)
    read_all(reader, uri)
    return settled(reader)


def entries(cache: Path) -> list[Path]:
    return [p for p in cache.rglob("*") if re.fullmatch(r"[0-9a-f]{16}-[0-9a-f]{16}", p.name)]


def object_dirs(cache: Path) -> list[Path]:
    return sorted(p.parent for p in (cache / LAYOUT / "objects").rglob("identity"))


def victim(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    """A directory of the user's own files that no cache operation may touch."""
    place = tmp_path / "precious"
    place.mkdir()
    files = {"authorized_keys": b"ssh-ed25519 AAAA user@host\n", "notes.txt": b"keep me\n" * 100}
    for name, data in files.items():
        (place / name).write_bytes(data)
    return place, files


def untouched(place: Path, files: dict[str, bytes]) -> bool:
    return sorted(os.listdir(place)) == sorted(files) and all(
        (place / name).read_bytes() == data for name, data in files.items()
    )


def within(seconds: float, work) -> None:  # type: ignore[no-untyped-def]
    """Runs `work` on a thread; fails (rather than hanging the suite) if it is not done in time."""
    failures: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as error:  # noqa: BLE001 - reported below
            failures.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"the read blocked for more than {seconds} s"
    assert not failures, failures


def test_a_link_planted_for_an_objects_version_is_removed_not_followed(
    rclone_server, rclone_dataset, tmp_path
):
    uri, _ = rclone_dataset
    cache = tmp_path / "cache"
    filled(uri, cache)
    place, files = victim(tmp_path)
    # Beside each object's directory, a "version" that is a link to the victim:
    # a reader that sees another version removes old ones.
    for directory in object_dirs(cache):
        (directory.parent / ("f" * 16)).symlink_to(place, target_is_directory=True)
    reader = sds_loader.BatchReader(uri, targets=TARGETS, cache_dir=cache)
    read_all(reader, uri)
    assert untouched(place, files)
    assert not [p for p in (cache / LAYOUT).rglob("*") if p.is_symlink()]


def test_a_usage_file_replaced_by_a_link_never_writes_through_it(rclone_server, rclone_dataset, tmp_path):
    uri, _ = rclone_dataset
    cache = tmp_path / "cache"
    filled(uri, cache)
    place, files = victim(tmp_path)
    usage = cache / LAYOUT / "usage"
    usage.unlink()
    usage.symlink_to(place / "authorized_keys")
    reader = sds_loader.BatchReader(uri, targets=TARGETS, cache_dir=cache)
    read_all(reader, uri)
    assert untouched(place, files)
    assert not usage.is_symlink() and usage.is_file()


def test_a_layout_directory_replaced_by_a_link_gets_nothing_written_into_it(
    rclone_server, rclone_dataset, tmp_path
):
    uri, _ = rclone_dataset
    cache = tmp_path / "cache"
    place, files = victim(tmp_path)
    (cache / LAYOUT).mkdir(parents=True)
    (cache / LAYOUT / "objects").symlink_to(place, target_is_directory=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reader = sds_loader.BatchReader(uri, targets=TARGETS, cache_dir=cache)
        read_all(reader, uri)
    assert untouched(place, files)
    said = [str(w.message) for w in caught if "node cache" in str(w.message)]
    assert len(said) == 1 and "objects" in said[0] and "link" in said[0], said
    assert reader.stats.cache_hits == 0


def test_fifos_planted_as_entries_identities_and_usage_never_block(rclone_server, rclone_dataset, tmp_path):
    uri, _ = rclone_dataset
    cache = tmp_path / "cache"
    filled(uri, cache)
    found = entries(cache)
    for path in found[:: max(1, len(found) // 4)]:
        path.unlink()
        os.mkfifo(path)
    first = object_dirs(cache)[0]
    (first / "identity").unlink()
    os.mkfifo(first / "identity")
    usage = cache / LAYOUT / "usage"
    usage.unlink()
    os.mkfifo(usage)

    def read() -> None:
        reader = sds_loader.BatchReader(uri, targets=TARGETS, cache_dir=cache)
        read_all(reader, uri)
        settled(reader)

    within(60, read)
    # What the reader opened it replaced; an entry it never needed may stay.
    assert not (first / "identity").is_fifo() and not usage.is_fifo()


@pytest.mark.parametrize("how", ["another owner", "writable by others"])
def test_a_cache_dir_of_another_user_or_open_to_others_is_refused_with_one_warning(
    rclone_server, rclone_dataset, tmp_path, how
):
    uri, _ = rclone_dataset
    cache = tmp_path / "shared-scratch"
    cache.mkdir()
    if how == "another owner":
        if os.geteuid() != 0:
            pytest.skip("giving a directory to another user needs root (CI runs the suite as root)")
        os.chown(cache, 12345, 12345)
        cache.chmod(0o755)
    else:
        cache.chmod(0o777)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reader = sds_loader.BatchReader(uri, targets=TARGETS, cache_dir=cache)
        read_all(reader, uri)
        read_all(reader, uri)
    said = [str(w.message) for w in caught if "node cache" in str(w.message)]
    assert len(said) == 1, said
    assert os.fspath(cache) in said[0] and "without the node cache" in said[0]
    assert ("belongs to user 12345" if how == "another owner" else "may be written by other users") in said[0]
    assert "choose a directory of your own" in said[0]
    assert reader.stats.cache_hits == 0
    assert not entries(cache)


def test_a_new_cache_directory_is_private(rclone_server, rclone_dataset, tmp_path):
    uri, _ = rclone_dataset
    cache = tmp_path / "new" / "cache"
    filled(uri, cache)
    for directory in [cache, *[p for p in cache.rglob("*") if p.is_dir()]]:
        assert directory.stat().st_mode & 0o077 == 0, directory
    assert (tmp_path / "new").stat().st_mode & 0o077 == 0


def test_an_object_without_an_etag_is_not_cached_so_a_same_second_replacement_is_read(
    rclone_server, tmp_path
):
    client = rclone_server.client()
    old = os.urandom(300_000)
    new = bytes(b ^ 0xFF for b in old)  # same size, written within the same second
    client.put_object(Bucket="datasets", Key="no-etag/blob.bin", Body=old)
    proxy = FaultProxy(rclone_server.port)
    proxy.drop_headers = {"etag"}
    settings = CacheSettings(directory=os.fspath(tmp_path / "cache"))
    uri = "s3://datasets/no-etag/blob.bin"

    def read() -> bytes:
        source = S3RangeSource([uri], endpoint_options(proxy.url), cache=settings)
        buffer = bytearray(200_000)
        source.fetch([(0, 10_000, memoryview(buffer))])
        assert source.wait_readahead(60)
        return bytes(buffer)

    try:
        assert read() == old[10_000:210_000]
        client.put_object(Bucket="datasets", Key="no-etag/blob.bin", Body=new)
        assert read() == new[10_000:210_000]
    finally:
        proxy.close()
    assert not entries(tmp_path / "cache")


def test_an_entry_damaged_under_an_open_reader_is_fetched_again(rclone_server, rclone_dataset, tmp_path):
    uri, _ = rclone_dataset
    cache = tmp_path / "cache"
    filled(uri, cache)
    reader = sds_loader.BatchReader(uri, targets=TARGETS, cache_dir=cache)
    read_all(reader, uri)  # every entry's blocks verified: later reads copy from its mapping
    fetched = reader.stats.fetched_bytes
    damaged = [p for p in entries(cache) if p.stat().st_size > 100_000]
    assert damaged
    for path in damaged:
        with open(path, "r+b") as handle:  # in place: the reader's mapping sees it
            size = os.fstat(handle.fileno()).st_size
            handle.seek(size - 1000)
            byte = handle.read(1)
            handle.seek(size - 1000)
            handle.write(bytes([byte[0] ^ 0x40]))
    read_all(reader, uri)
    assert reader.opened_state().source.cache_counters.dropped > 0
    assert reader.stats.fetched_bytes > fetched, "the damaged bytes were not fetched again"
