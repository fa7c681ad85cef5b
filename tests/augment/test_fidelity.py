"""An empty chain changes nothing: every read over every layout a chain runs on is signal_dataset's
record byte for byte, and the reader's own without a chain, with no keys added."""

from __future__ import annotations

import pytest
import signal_dataset as sds

from sds_loader import BatchReader, Window
from sds_loader.augment import Chain

ORDER = [3, 0, 23, 3, 11]


@pytest.mark.parametrize("root_name, field", [("captures", "samples"), ("pairs32", "iq"), ("pairs64", "iq")])
@pytest.mark.parametrize("window", [None, Window("time", 200, crop="random", pad=True)])
def test_an_empty_chain_reads_byte_for_byte(
    request: pytest.FixtureRequest, root_name: str, field: str, window: Window | None
) -> None:
    root = request.getfixturevalue(root_name)
    plain = BatchReader(root, fields=(field,), window=window).read(ORDER, epoch=2)
    for empty in (Chain([]), []):
        batch = BatchReader(root, fields=(field,), window=window, augment=empty).read(ORDER, epoch=2)
        assert sorted(batch) == sorted(plain)
        for key in plain:
            assert batch[key].dtype == plain[key].dtype
            assert batch[key].tobytes() == plain[key].tobytes()
    if window is None:
        opened = sds.open(root)
        for k, ordinal in enumerate(ORDER):
            assert plain[field][k].tobytes() == opened[ordinal][field].data.tobytes()
