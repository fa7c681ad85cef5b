"""The native core reading through a shard source written in Python.

`FileRangeSource` is a second, real implementation of the RangeSource
protocol (over local files, with ordinary Python file IO), so these tests
exercise the seam an object-storage source plugs into: batches come out
byte-identical to signal_dataset, and an error the source raises reaches the
caller of read() as the same exception object's type and message.
"""

from __future__ import annotations

import numpy as np
import pytest
import signal_dataset as sds
from file_range_source import FileRangeSource
from native_batches import native_read
from native_required import _native
from sds_factory import assert_matches_reference, write_dataset

from sds_loader.dataset import shard_table


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> str:
    root = str(tmp_path_factory.mktemp("source") / "captures")
    write_dataset(root, 60, records_per_shard=20, writer_options=[None, "uncompressed", "zstd:3"])
    return root


@pytest.mark.parametrize("threads", [1, 3])
def test_batches_through_a_python_source_match_signal_dataset(dataset, threads):
    table = shard_table(sds.open(dataset))
    source = FileRangeSource(list(table.paths))
    native = _native.ShardSet(list(table.paths), True, 8, source=source)
    ordinals = [int(o) for o in np.random.default_rng(threads).permutation(60)[:40]] + [7, 7]
    batch = native_read(native, table, ordinals, threads)
    assert_matches_reference(dataset, batch, ordinals, ["samples"], ["label"])
    # Every byte came through the source, many ranges per call.
    assert sum(len(call) for call in source.calls) >= 3
    assert max(len(call) for call in source.calls) > 1
    # No view outlives its fetch: scratch is reused by the next read.
    with pytest.raises(ValueError):
        source.kept[0][0]


@pytest.mark.parametrize("threads", [1, 3])
def test_an_error_the_source_raises_reaches_the_caller_unchanged(dataset, threads):
    table = shard_table(sds.open(dataset))
    intact = FileRangeSource(list(table.paths))
    native = _native.ShardSet(list(table.paths), True, 8, source=intact)
    native_read(native, table, [0, 25, 45], 1)  # footers parsed while the store worked
    intact.fail_on = 1
    with pytest.raises(sds.StorageError, match=r"file-range://.*the store refused the read"):
        native_read(native, table, list(range(0, 60, 3)), threads)
    # The reader is not spoiled by the failure.
    intact.fail_on = None
    batch = native_read(native, table, [41, 2, 23], threads)
    assert_matches_reference(dataset, batch, [41, 2, 23], ["samples"], ["label"])


def test_a_footer_the_source_cannot_fetch_raises_its_error(dataset):
    table = shard_table(sds.open(dataset))
    native = _native.ShardSet(
        list(table.paths), True, 8, source=FileRangeSource(list(table.paths), fail_on=0)
    )
    with pytest.raises(sds.StorageError, match="refused"):
        native.probe(0, 0, 0)


def test_a_source_that_is_not_one_is_refused_by_name():
    class NoFetch:
        def size(self, file: int) -> int:
            return 0

        def name(self, file: int) -> str:
            return "nowhere"

    with pytest.raises(TypeError, match=r"no fetch\(\) method"):
        _native.ShardSet(["a"], True, 8, source=NoFetch())


def test_outputs_stay_exported_while_the_read_runs(dataset):
    """A bytearray given as an output cannot be resized (and so moved) by
    another thread while the native core writes into it without the GIL.
    The source's fetch, which runs mid-read, tries."""
    table = shard_table(sds.open(dataset))
    source = FileRangeSource(list(table.paths))
    native = _native.ShardSet(list(table.paths), True, 8, source=source)
    ordinals = [3, 44, 21, 9]
    expected = native_read(native, table, ordinals, threads=1)  # footers read, layout known
    ((name, key, dtype, shape),) = native.probe(0, 3, 3)[0]
    out = bytearray(expected[name].nbytes)
    labels = bytearray(8 * len(ordinals))
    attempts: list[str] = []
    original_fetch = source.fetch

    def resizing_fetch(requests):
        try:
            out.extend(bytes(1 << 20))
            attempts.append("resized")
        except BufferError:
            attempts.append("refused")
        original_fetch(requests)

    source.fetch = resizing_fetch
    wanted = np.asarray(ordinals, dtype=np.int64)
    files, shard_records = table.locate(wanted)
    layout = _native.BatchLayout()
    layout.add_field(name, key, dtype, tuple(shape))
    layout.add_target("label", "i")
    native.read(files, shard_records, wanted, layout, {name: out, "label": labels}, 1)
    assert attempts and set(attempts) == {"refused"}
    assert bytes(out) == expected[name].tobytes()
    # Released once the read returned.
    out.extend(b"x")


def test_a_layout_refuses_what_no_read_could_fill(dataset):
    """A BatchLayout is checked as it is built, once per schema; a read checks only its buffers."""
    layout = _native.BatchLayout()
    with pytest.raises(ValueError, match="unknown dtype Q9"):
        layout.add_field("iq", "tensor_000000", "Q9", (2, 4))
    with pytest.raises(ValueError, match="no axis 2 to window"):
        layout.add_field("iq", "tensor_000000", "C64", (2, 4), window_axis=2)
    with pytest.raises(ValueError, match="no window, so no lengths"):
        layout.add_field("iq", "tensor_000000", "C64", (2, 4), lengths="iq_length")
    with pytest.raises(ValueError, match="target kind must be 'i' or 'f'"):
        layout.add_target("label", "s")
    layout.add_target("label", "i")
    assert (layout.fields, layout.targets) == (0, 1)
    table = shard_table(sds.open(dataset))
    native = _native.ShardSet(list(table.paths), True, 8)
    wanted = np.asarray([0, 1], dtype=np.int64)
    files, shard_records = table.locate(wanted)
    with pytest.raises(ValueError, match="no buffer for label"):
        native.read(files, shard_records, wanted, layout, {}, 1)
    with pytest.raises(ValueError, match="buffer for label holds 8 bytes, not 16"):
        native.read(files, shard_records, wanted, layout, {"label": np.zeros(1, dtype=np.int64)}, 1)
    labels = np.zeros(2, dtype=np.int64)
    assert not native.read(files, shard_records, wanted, layout, {"label": labels}, 1).any()
    reference = sds.open(dataset)
    assert labels.tolist() == [reference[0].metadata["label"], reference[1].metadata["label"]]
