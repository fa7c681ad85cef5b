"""scripts/augmentation_picture.py draws docs/augmentation.png from the reader's own boxes."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from repo_paths import load_program


def moved(script, intervals: np.ndarray, freq: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """The script's chain (time shift, frequency shift, inversion) on the stored boxes, by hand:
    clipped to the capture and to +-fs/2, dropped where less than half of an extent is left."""
    times, edges = [], []
    for (start, stop), (low, high) in zip(intervals.tolist(), freq.tolist(), strict=True):
        new_start, new_stop = start + script.SHIFT_SAMPLES, stop + script.SHIFT_SAMPLES
        kept_start, kept_stop = max(new_start, 0), min(new_stop, length)
        new_low, new_high = low + script.SHIFT_FRACTION, high + script.SHIFT_FRACTION
        kept_low, kept_high = max(new_low, -0.5), min(new_high, 0.5)
        if (kept_stop - kept_start) < 0.5 * (stop - start) or (kept_high - kept_low) < 0.5 * (high - low):
            continue
        times.append((kept_start, kept_stop))
        edges.append((-kept_high, -kept_low))
    return np.array(times).reshape(-1, 2), np.array(edges).reshape(-1, 2)


def test_the_picture_is_drawn_with_the_boxes_the_reader_moved(tmp_path) -> None:
    pytest.importorskip("matplotlib", reason="the picture needs matplotlib (the bench extra)")
    script = load_program("scripts", "augmentation_picture.py")
    out = tmp_path / "picture.png"
    drawn = script.main(["--out", str(out)])
    with open(out, "rb") as handle:
        head = handle.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", head[16:24]) == (800, 288)
    before, after = drawn["before"], drawn["after"]
    # The capture drawn shows every rule: three bursts, one clipped at +fs/2, one clipped at the
    # capture's end and kept, one left with too little of itself and dropped.
    assert len(before["intervals"]) == 3 and len(after["intervals"]) == 2
    times, edges = moved(script, before["intervals"], before["freq"], script.LENGTH)
    np.testing.assert_array_equal(after["intervals"], times)
    np.testing.assert_allclose(after["freq"], edges, atol=1e-6)
    assert (after["freq"] == -0.5).any() and (after["intervals"][:, 1] == script.LENGTH).any()
