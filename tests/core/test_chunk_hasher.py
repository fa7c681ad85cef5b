"""The chunk hasher against Riegeli's hash computed whole by libhighwayhash:
the same value however the bytes are cut into pieces, whichever pieces are
copied as they are hashed, on the implementation this CPU picks and on the
portable one (which a CPU with AVX2 never runs otherwise), and every copied
piece copied exactly."""

from __future__ import annotations

import numpy as np
import pytest
from native_required import _native
from shard_surgery import riegeli_hash

# Around HighwayHash's 32-byte packets and the hasher's 8 KiB steps.
SIZES = [0, 1, 31, 32, 33, 64, 8191, 8192, 8193, 65_536 + 24, 200_001]


@pytest.mark.parametrize("portable", [False, True], ids=["best", "portable"])
@pytest.mark.parametrize("size", SIZES)
def test_any_cut_of_the_bytes_hashes_as_the_whole(size, portable):
    rng = np.random.default_rng(size)
    data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
    expected = riegeli_hash(data)
    for trial in range(6):
        cuts = sorted(rng.integers(0, size + 1, int(rng.integers(0, 8))).tolist())
        copied = rng.integers(0, 2, len(cuts) + 1).astype(bool).tolist()
        if trial == 0:
            cuts, copied = [], [True]  # one piece, copied
        got, copy = _native.chunk_hash(data, cuts, copied, portable)
        assert got == expected, (size, cuts, copied)
        bounds = [0, *cuts, size]
        for k, (begin, end) in enumerate(zip(bounds, bounds[1:])):
            piece = copy[begin:end]
            assert piece == (data[begin:end] if copied[k] else bytes(end - begin)), (k, begin, end)


def test_a_changed_byte_changes_the_hash():
    data = bytearray(np.random.default_rng(1).integers(0, 256, 20_000, dtype=np.uint8).tobytes())
    before, _ = _native.chunk_hash(bytes(data), [9_000], [True, False])
    data[12_345] ^= 1
    after, _ = _native.chunk_hash(bytes(data), [9_000], [True, False])
    assert before != after and after == riegeli_hash(bytes(data))
