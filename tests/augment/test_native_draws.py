"""augment_draw: parameter draws as a pure function of (seed, epoch, ordinal, position, draw)."""

from __future__ import annotations

import numpy as np
from native_required import _native


def test_draws_are_uniforms_in_the_unit_interval():
    values = _native.augment_draw(3, 0, np.arange(20_000), 2, 3)
    assert values.shape == (20_000, 3) and values.dtype == np.float64
    assert values.min() >= 0.0 and values.max() < 1.0
    for column in values.T:
        assert abs(column.mean() - 0.5) < 0.01 and abs(column.var() - 1 / 12) < 0.003
        counts, _ = np.histogram(column, bins=10, range=(0, 1))
        assert counts.min() > 1800 and counts.max() < 2200
    # Draws of one record are not correlated with each other or with the next record's.
    assert abs(np.corrcoef(values[:, 0], values[:, 1])[0, 1]) < 0.03
    assert abs(np.corrcoef(values[:-1, 0], values[1:, 0])[0, 1]) < 0.03


def test_a_records_draws_depend_on_its_key_alone():
    batch = _native.augment_draw(11, 4, np.array([9, 3, 7, 3]), 1, 2)
    alone = _native.augment_draw(11, 4, np.array([7]), 1, 2)
    assert batch[2].tobytes() == alone[0].tobytes()
    assert batch[1].tobytes() == batch[3].tobytes()
    # Asking for more draws extends the same stream.
    longer = _native.augment_draw(11, 4, np.array([7]), 1, 5)
    assert longer[0, :2].tobytes() == alone[0].tobytes()


def test_every_part_of_the_key_changes_the_draws():
    base = _native.augment_draw(1, 0, np.array([0]), 0, 8)[0]
    for seed, epoch, ordinal, position in ((2, 0, 0, 0), (1, 1, 0, 0), (1, 0, 1, 0), (1, 0, 0, 1)):
        other = _native.augment_draw(seed, epoch, np.array([ordinal]), position, 8)[0]
        assert not np.any(other == base)
    # The largest seed and epoch are keys like any other.
    assert _native.augment_draw(2**64 - 1, 2**64 - 1, np.array([2**63 - 1]), 2**32 - 1, 1).shape == (1, 1)


def test_an_empty_batch_draws_nothing():
    assert _native.augment_draw(0, 0, np.zeros(0, dtype=np.int64), 0, 4).shape == (0, 4)
    assert _native.augment_draw(0, 0, np.arange(3), 0, 0).shape == (3, 0)
