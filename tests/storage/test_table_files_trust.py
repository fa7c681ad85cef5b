"""Shard tables in a node cache are trusted only as this user's own files, naming this dataset's shards.

Whatever another process or user may have put in the cache directory:

- a FIFO planted as a table does not hang the reader, and a link planted as
  one is not followed: each is refused with a warning naming it, the table
  is read from the manifests and written in the link's place;
- the `tables` directory replaced by a link to a directory elsewhere gets
  nothing written into the link's target;
- a root of another user, writable by everyone, is refused with one warning
  naming it and the fix, and its planted table is not used; so is a root of
  this user's that others may write to;
- a table whose checksum is right but which names shards of another
  dataset is refused, rebuilt and replaced;
- a cache root the reader makes is ``0700``, and so is its `tables` folder.

Every read is checked against signal_dataset's own reader.
"""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
import signal_dataset as sds
from sds_factory import write_dataset

from sds_loader import BatchReader, table_files
from sds_loader import dataset as addressing

#: The user whose files the tests plant: any uid but this process's.
OTHER_UID = 65534


@pytest.fixture
def root(tmp_path: Path) -> str:
    path = tmp_path / "ds"
    write_dataset(path, 30, records_per_shard=3, shards_per_manifest=4)
    return str(path)


def forget_tables() -> None:
    with addressing._TABLES_LOCK:
        addressing._TABLES.clear()


def table_path(cache: Path, root: str) -> Path:
    return Path(table_files.path_for(str(cache), addressing.identity(sds.open(root))))


def expected(root: str, indices: list[int]) -> list[bytes]:
    dataset = sds.open(root)
    return [dataset[i]["samples"].data.tobytes() for i in indices]


def read_rows(root: str, cache: Path, indices: list[int]) -> tuple[list[bytes], list[str]]:
    """The rows a fresh reader reads from `root` with `cache`, and the warnings it gave."""
    forget_tables()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        batch = BatchReader(root, fields=("samples",), cache_dir=cache).read(indices)
    said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    return [row.tobytes() for row in batch["samples"]], said


def good_table(root: str, cache: Path) -> bytes:
    """The bytes of the table file a reader writes for `root` into `cache`."""
    read_rows(root, cache, [0])
    return table_path(cache, root).read_bytes()


def test_a_fifo_planted_as_the_table_does_not_hang_the_reader(root: str, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    good_table(root, cache)
    path = table_path(cache, root)
    path.unlink()
    os.mkfifo(path)
    # In a process of its own: a reader that opened the FIFO would wait for a writer forever.
    program = textwrap.dedent(
        f"""
        import warnings
        from sds_loader import BatchReader
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            batch = BatchReader({root!r}, fields=("samples",), cache_dir={str(cache)!r}).read([29, 4])
        print([str(w.message) for w in caught])
        print(batch["samples"].tobytes().hex())
        """
    )
    try:
        done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the reader hung on a FIFO planted as its shard table")
    assert done.returncode == 0, done.stderr[-2000:]
    said, rows = done.stdout.strip().splitlines()
    assert bytes.fromhex(rows) == b"".join(expected(root, [29, 4]))
    assert "is not a regular file" in said and str(path) in said
    assert path.is_file() and not path.is_fifo(), "the FIFO was not replaced by the table"


def test_a_link_planted_as_the_table_is_not_followed(root: str, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    good = good_table(root, cache)
    path = table_path(cache, root)
    elsewhere = tmp_path / "elsewhere.npz"
    elsewhere.write_bytes(good)  # a table that would load: only the link is wrong
    path.unlink()
    path.symlink_to(elsewhere)
    rows, said = read_rows(root, cache, [17, 2])
    assert rows == expected(root, [17, 2])
    assert any("is a symbolic link" in message and str(path) in message for message in said), said
    assert not path.is_symlink() and path.read_bytes() != b""
    assert elsewhere.read_bytes() == good, "the link's target was written through"


def test_a_tables_folder_replaced_by_a_link_gets_nothing_written_through_it(
    root: str, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    target = tmp_path / "target"
    target.mkdir()
    (cache / "tables").symlink_to(target, target_is_directory=True)
    rows, said = read_rows(root, cache, [5])
    assert rows == expected(root, [5])
    assert list(target.iterdir()) == [], "the cache wrote into the directory the link points to"
    assert any(str(cache / "tables") in message for message in said), said


def _plant(cache: Path, root: str, payload: bytes) -> Path:
    path = table_path(cache, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(payload)
    return path


def test_a_root_of_another_user_writable_by_all_is_refused_with_one_warning(
    root: str, tmp_path: Path
) -> None:
    if os.geteuid() != 0:
        pytest.skip("planting a directory of another user takes root (chown)")
    good = good_table(root, tmp_path / "mine")
    cache = tmp_path / "shared"
    cache.mkdir()
    planted = _plant(cache, root, good)
    os.chown(cache, OTHER_UID, OTHER_UID)
    os.chmod(cache, 0o777)
    before = planted.stat().st_mtime_ns
    rows, said = read_rows(root, cache, [29, 0])
    assert rows == expected(root, [29, 0])
    refusals = [message for message in said if str(cache) in message]
    assert len(refusals) == 1, said
    assert "belongs to user 65534" in refusals[0] and "choose a directory of your own" in refusals[0]
    # Neither read (the reader built its own table) nor written.
    assert planted.stat().st_mtime_ns == before
    assert sorted(path.name for path in planted.parent.iterdir()) == [planted.name]


def test_a_root_others_may_write_to_is_refused_and_the_fix_named(root: str, tmp_path: Path) -> None:
    cache = tmp_path / "open"
    cache.mkdir()
    os.chmod(cache, 0o777)
    rows, said = read_rows(root, cache, [8])
    assert rows == expected(root, [8])
    refusals = [message for message in said if str(cache) in message]
    assert len(refusals) == 1, said
    assert f"chmod 700 {cache}" in refusals[0]
    assert not (cache / "tables").exists()


def _forged(payload: bytes, root: str) -> bytes:
    """`payload` (a table file) with its shards moved under `root`, checksum made right again."""
    with np.load(io.BytesIO(payload), allow_pickle=False) as stored:
        arrays = {name: np.asarray(stored[name]) for name in stored.files}
    header = json.loads(bytes(arrays["header"]).decode())
    header["root"] = root
    header["checksum"] = table_files._checksum(arrays, header)
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    out = io.BytesIO()
    np.savez(out, **arrays)
    return out.getvalue()


def test_a_table_naming_shards_of_another_dataset_is_refused_and_replaced(root: str, tmp_path: Path) -> None:
    other = tmp_path / "other"
    write_dataset(other, 30, records_per_shard=3, shards_per_manifest=4)
    cache = tmp_path / "cache"
    good = good_table(root, cache)
    path = _plant(cache, root, _forged(good, str(other)))
    rows, said = read_rows(root, cache, [11, 22])
    assert rows == expected(root, [11, 22])
    assert any("not one of" in message and str(other) in message for message in said), said
    assert path.read_bytes() != _forged(good, str(other)), "the forged table was kept"
    origin = table_files.Origin(root=root, kind="data", table_root=root)
    assert table_files.load(str(cache), addressing.identity(sds.open(root)), 30, origin) is not None


def test_the_cache_root_and_its_tables_folder_are_made_private(root: str, tmp_path: Path) -> None:
    cache = tmp_path / "new" / "cache"
    rows, said = read_rows(root, cache, [3])
    assert rows == expected(root, [3])
    assert said == []
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert stat.S_IMODE((cache / "tables").stat().st_mode) == 0o700
    assert stat.S_IMODE(table_path(cache, root).stat().st_mode) == 0o600
