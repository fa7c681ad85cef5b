"""Announcing upcoming records: the bytes hinted, and the kernel's pages they reach."""

from __future__ import annotations

import functools
import time

import numpy as np
import pytest
import signal_dataset as sds
from disk_pages import drop_cached_pages, page_cached
from sds_factory import assert_batch, capture, read_chunks, record_chunks, shard_ordinals, write_dataset

from sds_loader import BatchReader
from sds_loader.cli.bench.loader import drop_pages

RECORDS = 96
PER_SHARD = 40


@pytest.fixture(scope="module", params=[None, "group_size:4"], ids=["group1", "group4"])
def root(request, disk_path_factory) -> str:
    # On the checkout's disk, not in the temporary folder: the page-cache test
    # drops the shards' pages, which a tmpfs folder never gives up.
    path = disk_path_factory("readahead") / "captures"
    write_dataset(
        path,
        RECORDS,
        functools.partial(capture, samples=512),
        records_per_shard=PER_SHARD,
        writer_options=request.param,
    )
    return str(path)


def expected_hint_bytes(root: str, ordinals) -> int:
    """Bytes of the chunks holding `ordinals`, merged where they touch, from the files themselves."""
    ranges = []
    for path, owned in shard_ordinals(root).items():
        chunks = record_chunks(path)
        footer = [chunk for chunk in read_chunks(path) if chunk.chunk_type == "r"][-2]
        limits = [chunk.begin for chunk in chunks[1:]] + [footer.begin]
        firsts = np.cumsum([0] + [chunk.num_records for chunk in chunks])
        for ordinal in set(ordinals) & set(owned):
            c = int(np.searchsorted(firsts, owned.index(ordinal), side="right") - 1)
            ranges.append((path, chunks[c].begin, limits[c]))
    total, last = 0, None
    for path, begin, end in sorted(ranges):
        if last is not None and last[0] == path and begin <= last[1]:
            total += max(0, end - last[1])
            last = (path, max(last[1], end))
        else:
            total += end - begin
            last = (path, end)
    return total


@pytest.mark.parametrize(
    "ordinals", [[5], [5, 5, 5], [6, 5, 7, 4], [0, 39, 40, 95, 17, 18, 60], list(range(RECORDS))]
)
def test_will_need_announces_exactly_the_chunks_of_the_records(root, ordinals) -> None:
    reader = BatchReader(root)
    assert reader.will_need(ordinals) == expected_hint_bytes(root, ordinals)


def test_will_need_refuses_an_ordinal_out_of_range(root) -> None:
    reader = BatchReader(root)
    with pytest.raises(IndexError):
        reader.will_need([RECORDS])
    assert reader.will_need([]) == 0


def test_hinted_pages_reach_the_page_cache_and_read_back_unchanged(root) -> None:
    owners = shard_ordinals(root)
    path = sorted(owners)[1]
    ordinals = owners[path][20:28]
    chunks = record_chunks(path)
    first_record = np.cumsum([0] + [chunk.num_records for chunk in chunks])
    probe = chunks[int(np.searchsorted(first_record, 24, side="right") - 1)].begin + 100
    drop_pages(owners)
    drop_cached_pages(path)
    reader = BatchReader(root, fields=["samples"], targets=["label"])
    assert reader.will_need(ordinals) > 0
    deadline = time.monotonic() + 10
    while not page_cached(path, probe) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert page_cached(path, probe)
    assert_batch(root, reader.read(ordinals), ordinals, ["samples"], ["label"])


def test_a_published_view_hints_the_chunks_of_its_sources_shards(tmp_path) -> None:
    base = tmp_path / "base"
    write_dataset(base, 10, records_per_shard=4)
    view = str(tmp_path / "picked")
    sds.open(str(base)).select([3, 1, 2]).publish(view, dataset_id="picked", snapshot_id="v1")
    reader = BatchReader(view, fields=["samples"])
    assert reader.will_need([0, 1, 2]) > 0
    assert_batch(view, reader.read([2, 0]), [2, 0], ["samples"])
    assert reader.stats.fallback_records == 0


def test_a_forked_child_hints_and_reads_after_its_parent_did(root) -> None:
    import multiprocessing

    reader = BatchReader(root, fields=["samples"])
    ordinals = [3, 50, 51, 90]
    assert reader.will_need(ordinals) > 0  # the parent's hint thread is running now
    expected = reader.read(ordinals)["samples"].tobytes()
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)

    def child() -> None:
        # The inherited reader opens its own core here and drops the parent's,
        # whose hint thread does not exist in this process.
        send.send((reader.will_need(ordinals), reader.read(ordinals)["samples"].tobytes()))

    process = context.Process(target=child)
    process.start()
    assert receive.poll(60), "the child neither answered nor failed within a minute"
    hinted, got = receive.recv()
    process.join(60)
    assert process.exitcode == 0
    assert hinted > 0 and got == expected
