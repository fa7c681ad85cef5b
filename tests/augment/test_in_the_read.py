"""The chain runs inside the read: on each row right after the core decodes it, on the thread that
decoded it, and on the rows the core leaves to signal_dataset once they are filled; both ways give
the same bytes."""

from __future__ import annotations

import os

import numpy as np
import pytest
from augment_factory import COUNT, complex_capture
from native_required import _native  # noqa: F401
from sds_factory import write_dataset

from sds_loader import BatchReader, Window, stage_times
from sds_loader.augment import Chain, FrequencyShift, Noise, Phase, Resample, TimeShift

TRANSPOSED = "group_size:1,transpose:true"
ORDER = [13, 2, 27, 2, 8, 31, 20, 0]
CHAINS = {
    "pointwise": Chain([Phase(), FrequencyShift(fraction=(-0.1, 0.1)), Noise(snr_db=(0, 20))], seed=3),
    "moving": Chain(
        [Phase(), TimeShift(samples=(-64, 64)), Noise(snr_db=(0, 20)), Resample(factor=(0.8, 1.25))], seed=3
    ),
}
#: Whole records and a window, each under a pointwise chain and one that moves samples: every path.
EVERY_CHAIN = pytest.mark.parametrize("chain", CHAINS.values(), ids=CHAINS.keys())
EVERY_PATH = pytest.mark.parametrize(
    "window", [None, Window("time", 300, crop="random", pad=True)], ids=["whole", "window"]
)


@pytest.fixture(scope="module")
def layouts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """One set of records written three ways: zstd, every shard transposed (which the core leaves to
    signal_dataset), and the two alternating shard by shard."""
    roots = {}
    shards = (2 * COUNT) // 10 + 1
    for name, options in {
        "zstd": None,
        "transposed": TRANSPOSED,
        "mixed": [None if k % 2 == 0 else TRANSPOSED for k in range(shards)],
    }.items():
        root = tmp_path_factory.mktemp(name) / "captures.sds"
        write_dataset(root, 2 * COUNT, complex_capture, records_per_shard=10, writer_options=options)
        roots[name] = os.fspath(root)
    return roots


@EVERY_CHAIN
@EVERY_PATH
def test_rows_the_core_decodes_and_rows_signal_dataset_fills_are_augmented_alike(
    layouts: dict[str, str], chain: Chain, window: Window | None
) -> None:
    batches = {}
    for name, root in layouts.items():
        reader = BatchReader(root, fields=("samples",), window=window, augment=chain, threads=2)
        batches[name] = reader.read(ORDER, epoch=4)
        stats = reader.stats
        expected_fallback = {"zstd": 0, "transposed": len(ORDER), "mixed": None}[name]
        if expected_fallback is not None:
            assert stats.fallback_records == expected_fallback, (name, stats)
        else:
            assert 0 < stats.fallback_records < len(ORDER), stats
    plain = BatchReader(layouts["zstd"], fields=("samples",), window=window).read(ORDER, epoch=4)
    for key, values in batches["zstd"].items():
        for name in ("transposed", "mixed"):
            assert batches[name][key].tobytes() == values.tobytes(), (name, key)
    # The chain did change the samples (a row of zeros aside).
    assert not np.array_equal(batches["zstd"]["samples"], plain["samples"])


@EVERY_CHAIN
@EVERY_PATH
def test_the_reads_threads_time_the_chain_as_a_stage_of_their_own(
    layouts: dict[str, str], chain: Chain, window: Window | None
) -> None:
    # Every path (whole records, a window in place, a window read from its
    # span) runs the chain in the core's threads, where it is timed.
    with stage_times.sampled_every(1):
        augmented = BatchReader(layouts["zstd"], fields=("samples",), window=window, augment=chain, threads=1)
        plain = BatchReader(layouts["zstd"], fields=("samples",), window=window, threads=1)
        for _ in range(3):
            augmented.read(ORDER, epoch=1)
            plain.read(ORDER, epoch=1)
    assert augmented.stats.stage_seconds["augment"] > 0, augmented.stats.stage_seconds
    assert plain.stats.stage_seconds["augment"] == 0, plain.stats.stage_seconds
