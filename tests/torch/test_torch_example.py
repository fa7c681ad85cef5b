"""examples/train_classifier.py trains briefly on augmented captures, and its loss falls."""

from __future__ import annotations

import torch_required  # noqa: F401 - skips this module without torch

import re

import pytest
from repo_paths import load_program


def test_training_loss_falls(tmp_path, capsys) -> None:
    example = load_program("examples", "train_classifier.py")
    root = tmp_path / "captures"
    history = example.main(
        [
            "--records",
            "512",
            "--epochs",
            "3",
            "--batch-size",
            "32",
            "--length",
            "128",
            "--root",
            str(root),
            "--num-workers",
            "2",
        ]
    )
    printed = capsys.readouterr().out
    losses = [float(v) for v in re.findall(r"^epoch \d+/3  loss (\d+\.\d+)", printed, re.M)]
    assert losses == pytest.approx([row["loss"] for row in history], abs=1e-4)
    assert len(history) == 3
    assert history[-1]["loss"] < history[0]["loss"]
    assert all(0.0 <= row["accuracy"] <= 1.0 and 0.0 <= row["val_accuracy"] <= 1.0 for row in history)
    # The training captures went through the chain: its noise, drawn with probability 0.5,
    # was added to about half of some 400 captures an epoch, differently each epoch.
    noised = [row["noised"] for row in history]
    assert all(0.35 < share < 0.65 for share in noised), noised
    assert len(set(noised)) > 1, noised
    # The dataset was written where asked, and a second run reuses it.
    assert (root / "objects").is_dir()
    again = example.main(
        ["--records", "512", "--epochs", "1", "--length", "128", "--root", str(root), "--no-augment"]
    )
    assert "wrote" not in capsys.readouterr().out
    assert len(again) == 1 and again[0]["noised"] == 0.0
