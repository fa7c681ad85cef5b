"""Faults of every kind through DataLoader workers: every row exact, every ordinal once an epoch.

An `SDSTorchDataset` reading through tests/support/fault_proxy.py goes to two
forked DataLoader workers, with and without a node cache they share, in
front of `rclone serve s3` and fake-gcs-server. First every range's first GET
meets a fault, its kind drawn from all of them; then the soak: three epochs
with a node cache under 1 fault in 5 GETs of every kind. Each epoch delivers
every record once, each row signal_dataset's record byte for byte; bytes
that failed their check were fetched again (`refetches`, summed over the
workers), the other faults retried (`fetch_retries`).
"""

from __future__ import annotations

from torch_required import torch

import pytest
from fault_proxy import KINDS, Fault, first, rate
from fault_stores import ProxiedStore
from native_required import _native  # noqa: F401
from torch.utils.data import DataLoader

from sds_loader.read_stats import ReadStats
from sds_loader.torch import SDSTorchDataset, collate

#: The answer timeout a stalled GET runs into, and how long the proxy stalls.
READ_TIMEOUT = 0.3
STALL_SECONDS = 1.5


def faulty_dataset(proxied: ProxiedStore, cache) -> SDSTorchDataset:
    proxied.proxy.stall_seconds = STALL_SECONDS
    return SDSTorchDataset(
        proxied.uri, object_store=proxied.object_store(), cache_dir=cache, read_timeout=READ_TIMEOUT
    )


def read_epochs(proxied: ProxiedStore, dataset: SDSTorchDataset, epochs: int) -> None:
    """`epochs` shuffled epochs through 2 forked workers, each delivering every ordinal once, rows exact."""
    for epoch in range(epochs):
        loader = DataLoader(
            dataset,
            batch_size=8,
            shuffle=True,
            num_workers=2,
            multiprocessing_context="fork",
            collate_fn=collate,
            generator=torch.Generator().manual_seed(epoch),
        )
        ordinals = [o for batch in loader for o in proxied.ordinals_of(batch, keys=("inputs", "target"))]
        assert sorted(ordinals) == list(range(len(proxied))), f"epoch {epoch}: not every ordinal once"


#: The probe a reader sends for a shard whose footer the node cache holds: its byte is not read.
PROBE = "bytes=-1"


def assert_refetched_what_was_damaged(stats: ReadStats, proxied: ProxiedStore) -> None:
    """Damaged tails or record runs were fetched again, and nothing else was (a refetch of a run may
    meet another flip, and two flipped GETs of one run cost one refetch)."""
    proxy = proxied.proxy
    checked = sum(
        1 for _, sent, part, kind in proxy.log if kind == "flip" and part != "head" and sent != PROBE
    )
    assert checked > 0, proxy.log
    assert 0 < stats.refetches <= proxy.injected["flip"], (stats.refetches, proxy.injected_at)


@pytest.mark.parametrize("cached", [False, True], ids=["uncached", "node-cache"])
def test_the_first_try_of_every_range_failing_costs_no_row(proxied, cached, tmp_path):
    proxied.proxy.inject(Fault(KINDS, first(1), seed=5))
    dataset = faulty_dataset(proxied, tmp_path / "cache" if cached else None)
    read_epochs(proxied, dataset, 1)
    stats = dataset.stats().total
    injected = proxied.proxy.injected
    assert set(injected) == set(KINDS), injected
    assert_refetched_what_was_damaged(stats, proxied)
    assert stats.fetch_retries > 0


def test_three_epochs_under_one_fault_in_five_gets_lose_no_row(proxied, tmp_path):
    """The soak: every kind of fault, 1 GET in 5, three epochs through workers sharing a node cache.
    Flipped bytes are drawn as often as the other kinds together, as they were where the fault was
    met (4 of 9 faults)."""
    proxied.proxy.inject(Fault(("flip",) * (len(KINDS) - 1) + KINDS, rate(0.2, seed=58)))
    dataset = faulty_dataset(proxied, tmp_path / "cache")
    read_epochs(proxied, dataset, 3)
    gets, injected = proxied.proxy.gets.total(), proxied.proxy.injected
    assert 0.1 * gets <= injected.total() <= 0.3 * gets, (gets, injected)
    assert injected["flip"] > 0 and len(injected) >= 4, injected
    assert_refetched_what_was_damaged(dataset.stats().total, proxied)
