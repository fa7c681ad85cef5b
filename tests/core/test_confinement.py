"""Local shards are opened as signal_dataset's confined store opens them, or refused.

Each case hands the reader a dataset that signal_dataset refuses: a shard (data,
metadata or annotation) replaced by a symbolic link to a valid shard elsewhere,
a directory of shards replaced by a link, a FIFO where a shard should be, a
valid shard of another size than its manifest declares. signal_dataset's own
refusal is asserted first, so each case is one it really refuses; sds-loader
must refuse it too, with a typed error naming the path, and must never return
the other file's records.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import signal_dataset as sds
from annotation_factory import write_annotated
from sds_factory import capture, write_dataset

from sds_loader import Annotations, BatchReader
from sds_loader.errors import CorruptShardError, UnsafePathError

COUNT = 8
PER_SHARD = 4


def shard_files(root: str | Path, kind: str = "data") -> list[str]:
    return sorted(glob.glob(f"{root}/objects/{kind}/*/*.arrayrecord"))


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A valid dataset of other records, whose shards the hostile datasets link to."""
    root = tmp_path_factory.mktemp("elsewhere") / "ds"
    write_dataset(root, COUNT, lambda i: capture(i + 1000), records_per_shard=PER_SHARD)
    return str(root)


@pytest.fixture
def victim(tmp_path: Path) -> str:
    root = tmp_path / "ds"
    write_dataset(root, COUNT, records_per_shard=PER_SHARD)
    return str(root)


def signal_dataset_refuses(root: str, read) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError):
        read(sds.open(root))


def test_symlinked_data_shard_is_refused(victim: str, elsewhere: str) -> None:
    shard = shard_files(victim)[0]
    os.remove(shard)
    os.symlink(shard_files(elsewhere)[0], shard)
    signal_dataset_refuses(victim, lambda ds: [ds[i] for i in range(COUNT)])
    with pytest.raises(UnsafePathError, match="symbolic link") as raised:
        BatchReader(victim, fields=("samples",)).read(np.arange(COUNT))
    assert shard in str(raised.value)


def test_symlinked_shard_directory_is_refused(victim: str, elsewhere: str) -> None:
    data = Path(victim) / "objects" / "data"
    shutil.rmtree(data)
    os.symlink(Path(elsewhere) / "objects" / "data", data)
    signal_dataset_refuses(victim, lambda ds: ds[0])
    with pytest.raises(UnsafePathError, match="symbolic links are not allowed in dataset paths: data"):
        BatchReader(victim, fields=("samples",)).read([0])


def test_symlinked_metadata_shard_is_refused(victim: str, elsewhere: str) -> None:
    shard = shard_files(victim, "metadata")[0]
    os.remove(shard)
    os.symlink(shard_files(elsewhere, "metadata")[0], shard)
    signal_dataset_refuses(victim, lambda ds: [ds.record_metadata[i] for i in range(COUNT)])
    reader = BatchReader(victim, fields=("samples",))
    with pytest.raises(UnsafePathError, match="symbolic link"):
        reader.metadata(np.arange(COUNT), ["label"])


def test_symlinked_annotation_shard_is_refused(tmp_path: Path) -> None:
    real = write_annotated(tmp_path / "real")
    other = write_annotated(tmp_path / "other")
    del real, other
    pattern = "annotations/sets/bursts/*/objects/*/*.arrayrecord"
    shard = sorted(glob.glob(str(tmp_path / "real" / pattern)))[0]
    os.remove(shard)
    # The other dataset's shard at the same position holds rows of the same shape.
    os.symlink(sorted(glob.glob(str(tmp_path / "other" / pattern)))[0], shard)
    root = str(tmp_path / "real")
    signal_dataset_refuses(root, lambda ds: [ds.annotations["bursts"][i] for i in range(23)])
    with pytest.raises(UnsafePathError, match="symbolic link"):
        reader = BatchReader(root, fields=("samples",), annotations=[Annotations("bursts", ("intervals",))])
        reader.read(np.arange(23))


def test_fifo_in_place_of_a_shard_is_refused_at_once(victim: str) -> None:
    shard = shard_files(victim)[0]
    os.remove(shard)
    os.mkfifo(shard)
    signal_dataset_refuses(victim, lambda ds: ds[0])
    # In a child process, so that a reader that waits on the FIFO fails the
    # test by its timeout rather than hanging the suite.
    program = textwrap.dedent(
        f"""
        from sds_loader import BatchReader
        from sds_loader.errors import UnsafePathError
        try:
            BatchReader({victim!r}, fields=("samples",)).read([0])
        except UnsafePathError as error:
            print("refused:", error)
        """
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "refused: local object is not a regular file" in done.stdout
    assert shard in done.stdout


@pytest.fixture(scope="module")
def larger_shard(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A valid shard of the same records' shape but more bytes than the victim's shards."""
    root = tmp_path_factory.mktemp("larger") / "ds"
    write_dataset(root, 3 * PER_SHARD, lambda i: capture(i, samples=8192), records_per_shard=3 * PER_SHARD)
    return shard_files(root)[0]


def test_shard_of_another_size_than_its_manifest_declares_is_refused(victim: str, larger_shard: str) -> None:
    shard = shard_files(victim)[0]
    declared = os.path.getsize(shard)
    shutil.copyfile(larger_shard, shard)
    assert os.path.getsize(shard) != declared
    with pytest.raises(sds.CorruptDatasetError, match="where the manifest that names it declares"):
        ds = sds.open(victim)
        [ds[i] for i in range(COUNT)]
    with pytest.raises(CorruptShardError, match=f"declares {declared}") as raised:
        BatchReader(victim).read(np.arange(COUNT))
    assert shard in str(raised.value)


def test_shard_replaced_while_closed_is_refused_when_reopened(victim: str, larger_shard: str) -> None:
    # One open file at a time: reading the second shard closes the first, and
    # reading the first again reopens it, which checks it again.
    reader = BatchReader(victim, fields=("samples",), max_open_files=1)
    expected = [sds.open(victim)[i]["samples"].data.tobytes() for i in range(PER_SHARD)]
    first = reader.read(np.arange(PER_SHARD))["samples"]
    assert [row.tobytes() for row in first] == expected
    reader.read(np.arange(PER_SHARD, COUNT))
    shutil.copyfile(larger_shard, shard_files(victim)[0])
    with pytest.raises(CorruptShardError, match="where the manifest that names it declares"):
        reader.read(np.arange(PER_SHARD))


def test_a_confined_dataset_still_reads_byte_for_byte(victim: str) -> None:
    expected = sds.open(victim)
    batch = BatchReader(victim, fields=("samples",), targets=("label",)).read(np.arange(COUNT))
    for row in range(COUNT):
        assert batch["samples"][row].tobytes() == expected[row]["samples"].data.tobytes()
        assert batch["label"][row] == expected[row].metadata["label"]
