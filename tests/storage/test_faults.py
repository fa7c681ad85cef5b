"""A fault on the way from the store costs at most the read it hit: every row exact, each refetch counted.

Each kind of fault tests/support/fault_proxy.py injects meets the first GET
of every range of the data shards, between a reader and `rclone serve s3` or
fake-gcs-server, with and without a node cache; flipped bytes meet the
first GET of each byte of the shards' tails, heads or record runs. Bytes that
fail their check are fetched again (`stats.refetches`, one per flipped GET),
other faults are retried (`stats.fetch_retries`), and nothing damaged is
kept: the same reader reads on exact, and a second reader over the same node
cache finds every byte there and drops none.
"""

from __future__ import annotations

import pytest
from cache_readers import settled
from fault_proxy import Fault, first, once_per_byte
from fault_stores import TARGETS, ProxiedStore
from native_required import _native  # noqa: F401

import sds_loader
from sds_loader import augment

#: One record or a run of two in each of the four shards (12 records each).
INDICES = [7, 19, 20, 33, 45, 2]
SHARDS = 4
#: The answer timeout a stalled GET runs into, and how long the proxy stalls.
READ_TIMEOUT = 0.3
STALL_SECONDS = 1.5

FLIPS = {part: Fault("flip", once_per_byte(), parts=(part,)) for part in ("tail", "head", "body")}
TRANSIENT = {
    "reset": Fault("reset", first(1)),
    "short": Fault("short", first(1)),
    "503": Fault("status", first(1), status=503),
    "500": Fault("status", first(1), status=500),
    "stall": Fault("stall", first(1)),
    "whole": Fault("whole", first(1)),
    "other_range": Fault("other_range", first(1)),
}


def open_reader(proxied: ProxiedStore, cache, **options) -> sds_loader.BatchReader:
    return sds_loader.BatchReader(
        proxied.uri, targets=TARGETS, object_store=proxied.object_store(), cache_dir=cache, **options
    )


def assert_nothing_damaged_was_kept(
    proxied: ProxiedStore, first_reader: sds_loader.BatchReader, cache
) -> None:
    """A new reader over the node cache, with the faults gone, reads every row from it and drops nothing."""
    settled(first_reader)
    proxied.proxy.reset()
    again = open_reader(proxied, cache)
    proxied.assert_rows(again.read(INDICES), INDICES)
    settled(again)
    stats = again.stats
    assert (stats.refetches, stats.cache_drops, stats.fetch_retries) == (0, 0, 0)
    # One byte of each shard (its version and size); everything else from the cache.
    assert stats.fetched_bytes == SHARDS


@pytest.mark.parametrize("cached", [False, True], ids=["uncached", "node-cache"])
@pytest.mark.parametrize("part", list(FLIPS))
def test_flipped_bytes_are_fetched_again_and_never_kept(proxied, part, cached, tmp_path):
    cache = tmp_path / "cache" if cached else None
    proxied.proxy.inject(FLIPS[part])
    reader = open_reader(proxied, cache)
    proxied.assert_rows(reader.read(INDICES), INDICES)
    flipped = proxied.proxy.injected["flip"]
    assert flipped == proxied.proxy.injected_at["flip", part] > 0
    if part != "body":
        assert flipped == SHARDS  # each shard's opening met one
    stats = reader.stats
    assert stats.refetches == flipped, f"{flipped} flipped GETs of {part}s, {stats.refetches} refetches"
    assert stats.fetch_retries == 0, "a failed check is a refetch, not a retry"
    # The same reader reads on: nothing it holds was damaged.
    proxied.proxy.reset()
    proxied.assert_rows(reader.read(INDICES[::-1]), INDICES[::-1])
    assert reader.stats.refetches == flipped
    if cached:
        assert_nothing_damaged_was_kept(proxied, reader, cache)


@pytest.mark.parametrize("cached", [False, True], ids=["uncached", "node-cache"])
@pytest.mark.parametrize("case", list(TRANSIENT))
def test_transient_faults_are_retried_to_exact_rows(proxied, case, cached, tmp_path):
    cache = tmp_path / "cache" if cached else None
    proxy = proxied.proxy
    proxy.stall_seconds = STALL_SECONDS
    rule = TRANSIENT[case]
    (kind,) = rule.kinds
    proxy.inject(rule)
    options = {"read_timeout": READ_TIMEOUT} if kind == "stall" else {}
    reader = open_reader(proxied, cache, **options)
    proxied.assert_rows(reader.read(INDICES), INDICES)
    injected = proxy.injected[kind]
    assert injected >= 2 * SHARDS and set(proxy.injected) == {kind}  # every tail and head, and the records
    stats = reader.stats
    assert stats.refetches == 0, "no byte that arrived failed its check"
    # Each fault costs one attempt; a shard's head is asked for once, and
    # without it the first read of those bytes fetches them.
    asked_again = injected - proxy.injected_at[kind, "head"]
    assert asked_again <= stats.fetch_retries <= injected
    if cached:
        assert_nothing_damaged_was_kept(proxied, reader, cache)


def test_a_row_decoded_again_after_a_refetch_is_augmented_as_a_clean_read_augments_it(proxied):
    # The chain runs on each row as it is decoded; a run whose bytes failed
    # their check is fetched and decoded again, and its rows augmented
    # again from the draws, not from what the first decode left.
    chain = augment.Chain(
        [
            augment.Phase(),
            augment.FrequencyShift(fraction=(-0.2, 0.2)),
            augment.TimeShift(samples=(-50, 50)),
            augment.Noise(snr_db=(0, 20)),
        ],
        seed=4,
    )
    proxied.proxy.inject(FLIPS["body"])
    reader = open_reader(proxied, None, augment=chain)
    damaged = reader.read(INDICES, epoch=1)
    assert reader.stats.refetches == proxied.proxy.injected["flip"] > 0
    proxied.proxy.reset()
    clean = open_reader(proxied, None, augment=chain).read(INDICES, epoch=1)
    assert sorted(damaged) == sorted(clean)
    for key, values in clean.items():
        assert damaged[key].tobytes() == values.tobytes(), key
