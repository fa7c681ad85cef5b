"""Train a small burst detector on augmented windows whose boxes follow the augmentation.

Writes captures of noise holding 0 to 4 bursts, with an annotation set of
each burst's interval in samples and its frequency edges (what `sds-loader
synth --bursts` writes), then trains a small convolutional net to mark, on
a coarse time-frequency grid of each window, the cells a burst covers. The
training windows go through a time shift, a frequency shift and, half the
time, a spectral inversion as they are read; the reader moves each burst's
box with them (and clips or drops the boxes pushed past the band edge or
out of the window), so the grid the net learns from is where the bursts are
in the samples it is given.

    python examples/detect_bursts.py --records 512 --epochs 4 --num-workers 2

Before training it measures that: the mean power inside the boxes the
reader returned over the window's median power, in dB, against the same for
the boxes as stored, laid on the same augmented windows. Boxes that follow
sit on the bursts; stale ones mostly miss them.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

from sds_loader import Annotations, Window, augment
from sds_loader.cli.synthetic_bursts import SET_NAME, write_burst_captures
from sds_loader.torch import SDSTorchDataset, collate

WINDOW = 1024
#: The STFT each window is seen through: FFT length and hop, in samples.
NFFT = 64
#: The grid the detector marks: time cells of NFFT samples, frequency cells of NFFT // POOL bins.
POOL = 4
#: How much more a missed burst cell costs than a false one.
POSITIVE_WEIGHT = 4.0


def augment_chain(seed: int) -> augment.Chain:
    """Each training capture's augmentation, drawn per (seed, epoch, capture).

    The set's frequency edges are fractions of the sample rate, so the chain
    is told a rate of 1: its Hz are fractions too.
    """
    return augment.Chain(
        [
            augment.TimeShift(samples=(-256, 256)),
            augment.FrequencyShift(fraction=(-0.15, 0.15)),
            augment.SpectralInversion(probability=0.5),
        ],
        seed=seed,
        sample_rate=1.0,
    )


def bursts() -> Annotations:
    return Annotations(
        SET_NAME, ("intervals", "freq"), positions={"intervals": "time"}, frequencies={"freq": "relative"}
    )


def dataset(root: str, seed: int, chain: augment.Chain | None) -> SDSTorchDataset:
    """Random windows of the captures with their bursts' boxes, augmented by `chain`."""
    return SDSTorchDataset(
        root,
        target=None,
        window=Window("time", WINDOW, crop="random"),
        annotations=[bursts()],
        augment=chain,
        seed=seed,
    )


# -- what the net sees and what it learns -------------------------------------


def spectrogram(samples: torch.Tensor) -> torch.Tensor:
    """Log power, (rows, 1, NFFT frequencies from -fs/2 up, WINDOW // NFFT times), of plain FFT frames."""
    frames = samples.reshape(samples.shape[0], WINDOW // NFFT, NFFT)
    power = torch.fft.fftshift(torch.fft.fft(frames, dim=-1), dim=-1).abs().square()
    return torch.log10(power + 1e-6).transpose(1, 2).unsqueeze(1)


def grid(batch: dict[str, Any]) -> torch.Tensor:
    """(rows, NFFT // POOL frequencies, WINDOW // NFFT times): 1 where a box covers most of a cell."""
    offsets = batch[f"{SET_NAME}.offsets"].numpy()
    intervals = batch[f"{SET_NAME}.intervals"].numpy().astype(np.float64)
    freq = batch[f"{SET_NAME}.freq"].numpy().astype(np.float64)
    times, frequencies = WINDOW // NFFT, NFFT // POOL
    t0 = np.arange(times) * NFFT
    f0 = -0.5 + np.arange(frequencies) / frequencies
    cells = np.zeros((len(offsets) - 1, frequencies, times), dtype=np.float32)
    for row in range(len(offsets) - 1):
        for (start, stop), (low, high) in zip(
            intervals[offsets[row] : offsets[row + 1]], freq[offsets[row] : offsets[row + 1]]
        ):
            in_time = (np.minimum(t0 + NFFT, stop) - np.maximum(t0, start)) / NFFT > 0.5
            in_freq = (np.minimum(f0 + 1 / frequencies, high) - np.maximum(f0, low)) * frequencies > 0.5
            cells[row] = np.maximum(cells[row], np.outer(in_freq, in_time))
    return torch.from_numpy(cells)


class Detector(nn.Module):
    """A few 3x3 convolutions over the log spectrogram, pooled to the grid: a logit per cell."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(8, 8, 3, padding=1),
            nn.ReLU(),
            nn.AvgPool2d((POOL, 1)),
            nn.Conv2d(8, 1, 1),
        )

    def forward(self, samples: torch.Tensor) -> torch.Tensor:
        return self.net(spectrogram(samples)).squeeze(1)


# -- boxes that follow --------------------------------------------------------


def box_contrast(root: str, seed: int, indices: Sequence[int], epoch: int = 0) -> dict[str, float]:
    """Mean power inside boxes over the window's median power, in dB, on augmented windows:
    with the boxes the reader moved ("followed"), and with the boxes as stored ("stored")."""
    augmented, plain = dataset(root, seed, augment_chain(seed)), dataset(root, seed, None)
    augmented.set_epoch(epoch)
    plain.set_epoch(epoch)
    moved = collate(augmented.__getitems__(list(indices)))
    stale = collate(plain.__getitems__(list(indices)))  # the same windows, as stored
    image = 10 * spectrogram(moved["inputs"]).squeeze(1).numpy()  # dB, (rows, NFFT, times)
    floor = np.median(image, axis=(1, 2))

    def contrast(batch: dict[str, Any]) -> float:
        offsets = batch[f"{SET_NAME}.offsets"].numpy()
        found = []
        for row in range(len(offsets) - 1):
            span = slice(offsets[row], offsets[row + 1])
            for (start, stop), (low, high) in zip(
                batch[f"{SET_NAME}.intervals"][span].numpy(), batch[f"{SET_NAME}.freq"][span].numpy()
            ):
                t = slice(int(start) // NFFT, max(int(start) // NFFT + 1, -(-int(stop) // NFFT)))
                f = slice(
                    int((low + 0.5) * NFFT),
                    max(int((low + 0.5) * NFFT) + 1, int(np.ceil((high + 0.5) * NFFT))),
                )
                found.append(float(np.mean(image[row, f, t])) - floor[row])
        return float(np.mean(found)) if found else float("nan")

    return {"followed": contrast(moved), "stored": contrast(stale)}


# -- training -----------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1024, help="captures to write (default 1024)")
    parser.add_argument("--length", type=int, default=4096, help="samples per capture (default 4096)")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument(
        "--root",
        help="dataset directory; written if it holds no dataset yet (default: a temporary directory)",
    )
    parser.add_argument("--num-workers", type=int, default=0, help="DataLoader workers")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Check the boxes, train, print one line per epoch; return the check and the epochs' numbers."""
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    with tempfile.TemporaryDirectory(prefix="sds-bursts-") as scratch:
        root = args.root or os.path.join(scratch, "bursts")
        if not os.path.exists(os.path.join(root, "objects")):
            started = time.perf_counter()
            write_burst_captures(root, args.records, args.length, args.seed)
            took = time.perf_counter() - started
            print(f"wrote {args.records} captures with bursts to {root} in {took:.1f} s")
        check = box_contrast(root, args.seed, range(min(args.records, 256)))
        print(
            f"power inside the boxes over each window's median: {check['followed']:.1f} dB where they "
            f"followed the augmentation, {check['stored']:.1f} dB where they stayed as stored"
        )
        return {"boxes": check, "history": train(root, args)}


def train(root: str, args: argparse.Namespace) -> list[dict[str, float]]:
    data = dataset(root, args.seed, augment_chain(args.seed))
    loader = DataLoader(
        data,
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=args.num_workers,
        collate_fn=collate,
        persistent_workers=args.num_workers > 0,
        generator=torch.Generator().manual_seed(args.seed + 1),
    )
    model = Detector()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    # A burst covers few cells of a window: its cells weigh more, or marking none would pay.
    loss_fn = nn.BCEWithLogitsLoss(pos_weight=torch.tensor(POSITIVE_WEIGHT))
    history: list[dict[str, float]] = []
    for epoch in range(1, args.epochs + 1):
        data.set_epoch(epoch)  # new windows and new draws, in every worker
        started = time.perf_counter()
        total_loss, hits, marked, seen = 0.0, 0.0, 0.0, 0
        for batch in loader:
            target = grid(batch)
            logits = model(batch["inputs"])
            loss = loss_fn(logits, target)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total_loss += loss.item() * target.shape[0]
            predicted = logits.detach() > 0
            hits += float((predicted & (target > 0)).sum())
            marked += float((predicted | (target > 0)).sum())
            seen += target.shape[0]
        row = {
            "epoch": epoch,
            "loss": total_loss / seen,
            # Intersection over union of the cells marked and the cells the boxes cover.
            "iou": hits / max(marked, 1.0),
            "records_per_s": seen / (time.perf_counter() - started),
        }
        history.append(row)
        print(
            f"epoch {epoch}/{args.epochs}  loss {row['loss']:.4f}  iou {row['iou']:.3f}  "
            f"({row['records_per_s']:.0f} records/s)",
            flush=True,
        )
    return history


if __name__ == "__main__":
    main()
