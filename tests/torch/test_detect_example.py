"""examples/detect_bursts.py: the boxes it trains on follow the augmentation, and its loss falls."""

from __future__ import annotations

import torch_required  # noqa: F401 - skips this module without torch

import re

import pytest
from repo_paths import load_program


def test_boxes_follow_and_detection_loss_falls(tmp_path, capsys) -> None:
    example = load_program("examples", "detect_bursts.py")
    root = tmp_path / "bursts"
    argv = ["--records", "256", "--epochs", "3", "--batch-size", "32", "--root", str(root)]
    found = example.main([*argv, "--num-workers", "2"])
    printed = capsys.readouterr().out
    # The boxes the reader moved sit on the bursts of the augmented windows (the bursts stand
    # some 20 dB over the noise); the boxes as stored, laid on the same windows, mostly miss them.
    boxes = found["boxes"]
    assert boxes["followed"] > 10.0 and boxes["followed"] > boxes["stored"] + 3.0, boxes
    assert f"{boxes['followed']:.1f} dB where they followed" in printed
    history = found["history"]
    losses = [float(v) for v in re.findall(r"^epoch \d+/3  loss (\d+\.\d+)", printed, re.M)]
    assert losses == pytest.approx([row["loss"] for row in history], abs=1e-4)
    assert history[-1]["loss"] < history[0]["loss"]
    assert all(0.0 <= row["iou"] <= 1.0 for row in history)
    # The dataset was written where asked, and a second run reuses it.
    assert (root / "objects").is_dir()
    again = example.main([*argv[:2], "--epochs", "1", "--root", str(root)])
    assert "wrote" not in capsys.readouterr().out
    assert len(again["history"]) == 1


def test_the_grid_marks_the_cells_a_box_covers() -> None:
    torch = pytest.importorskip("torch")
    example = load_program("examples", "detect_bursts.py")
    nfft, cells = example.NFFT, example.NFFT // example.POOL
    # One row with a box over time cells 2..4 (half of cell 5 is not most of it) and the
    # frequency cells from -0.25 to 0: cells 4..7 of 16; a second row with none.
    batch = {
        "bursts.offsets": torch.tensor([0, 1, 1]),
        "bursts.intervals": torch.tensor([[2 * nfft, 5 * nfft + nfft // 2]]),
        "bursts.freq": torch.tensor([[-0.25, 0.0]]),
    }
    marked = example.grid(batch)
    assert marked.shape == (2, cells, example.WINDOW // nfft)
    rows, times = torch.nonzero(marked[0], as_tuple=True)
    assert sorted(set(rows.tolist())) == [4, 5, 6, 7]
    assert sorted(set(times.tolist())) == [2, 3, 4]
    assert marked[1].sum() == 0
