"""Train a small modulation classifier on an SDS dataset through SDSTorchDataset.

Writes a labeled dataset of synthetic captures (BPSK, QPSK, 16-QAM and
tone-modulated FM, each with a random phase, a small frequency offset and
white noise at one of several SNRs: what `sds-loader synth` writes) with
signal_dataset, then trains a 1-D CNN on it through a DataLoader for a few
epochs, printing loss and accuracy per epoch.

    python examples/train_classifier.py --records 4096 --epochs 5 --num-workers 2

The loader is the one a real training script would use: batches are read in
one native call each and handed on by `sds_loader.torch.collate` without a
copy; with CUDA, batches are allocated page-locked so the DataLoader's pin step
has nothing left to do. The training captures are augmented as they are read
(`augment_chain`: a random phase, a carrier offset, a circular time shift and
noise that brings each capture to a random SNR below the one it has), in
the read's own threads; `set_epoch` draws them afresh each epoch, the same
in every worker. Validation reads the captures as stored.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Sequence

import torch
from torch import nn
from torch.utils.data import DataLoader, Subset, random_split

from sds_loader import augment
from sds_loader.cli.synthetic import MODULATIONS, write_captures
from sds_loader.torch import SDSTorchDataset, collate

# -- the model ------------------------------------------------------------------


class Classifier(nn.Module):
    """Conv1d stack over I and Q as two channels, pooled over time."""

    def __init__(self, classes: int = len(MODULATIONS)) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(2, 32, kernel_size=7, padding=3),
            nn.ReLU(),
            nn.MaxPool1d(2),
            nn.Conv1d(32, 32, kernel_size=5, padding=2),
            nn.ReLU(),
            nn.MaxPool1d(2),
            nn.Conv1d(32, 32, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool1d(1),
        )
        self.head = nn.Linear(32, classes)

    def forward(self, samples: torch.Tensor) -> torch.Tensor:
        # complex (B, T) -> real (B, 2, T)
        x = torch.view_as_real(samples).transpose(1, 2)
        return self.head(self.features(x).flatten(1))


# -- the augmentation -----------------------------------------------------------


def augment_chain(seed: int) -> augment.Chain:
    """What each training capture goes through as it is read, drawn per (seed, epoch, capture).

    The captures state no sample rate, so the offset is a fraction of it. The
    noise is relative to the SNR each capture's metadata states (`snr_db`):
    it lowers the SNR to the drawn one, and leaves a capture already below
    it as it is.
    """
    return augment.Chain(
        [
            augment.Phase(),
            augment.FrequencyShift(fraction=(-0.02, 0.02)),
            augment.TimeShift(samples=(-32, 32), circular=True),
            augment.Noise(snr_db=(0.0, 20.0), stored_snr="snr_db", probability=0.5),
        ],
        seed=seed,
    )


#: The batch key saying, per row, whether the chain's noise (its fourth transform) was added.
NOISED = "augment.3.noise.applied"

# -- training -------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=4096, help="captures to write (default 4096)")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument(
        "--root",
        help="dataset directory; written if it holds no dataset yet (default: a temporary directory)",
    )
    parser.add_argument("--num-workers", type=int, default=0, help="DataLoader workers")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--length", type=int, default=256, help="samples per capture")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-augment", action="store_true", help="train on the captures as stored")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> list[dict[str, float]]:
    """Train, print one line per epoch, and return those numbers per epoch."""
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    with tempfile.TemporaryDirectory(prefix="sds-captures-") as scratch:
        root = args.root or os.path.join(scratch, "captures")
        if not os.path.exists(os.path.join(root, "objects")):
            started = time.perf_counter()
            write_captures(root, args.records, args.length, args.seed)
            print(f"wrote {args.records} captures to {root} in {time.perf_counter() - started:.1f} s")
        return train(root, args)


def train(root: str, args: argparse.Namespace) -> list[dict[str, float]]:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    pin = device.type == "cuda"
    chain = None if args.no_augment else augment_chain(args.seed)
    augmented = SDSTorchDataset(root, pin_memory=pin, augment=chain)
    stored = SDSTorchDataset(root, pin_memory=pin)
    held_out = max(1, len(stored) // 5)
    train_part, val_part = random_split(
        range(len(stored)),
        [len(stored) - held_out, held_out],
        generator=torch.Generator().manual_seed(args.seed),
    )
    train_set, val_set = Subset(augmented, list(train_part)), Subset(stored, list(val_part))
    common = dict(
        batch_size=args.batch_size,
        num_workers=args.num_workers,
        collate_fn=collate,
        pin_memory=pin,
        persistent_workers=args.num_workers > 0,
    )
    train_loader = DataLoader(
        train_set, shuffle=True, generator=torch.Generator().manual_seed(args.seed + 1), **common
    )
    val_loader = DataLoader(val_set, **common)

    model = Classifier().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    history: list[dict[str, float]] = []
    for epoch in range(1, args.epochs + 1):
        started = time.perf_counter()
        augmented.set_epoch(epoch)  # new draws, in every worker
        model.train()
        total_loss, correct, seen, noised = 0.0, 0, 0, 0.0
        for batch in train_loader:
            inputs = batch["inputs"].to(device, non_blocking=True)
            target = batch["target"].to(device, non_blocking=True)
            logits = model(inputs)
            loss = loss_fn(logits, target)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total_loss += loss.item() * target.shape[0]
            correct += int((logits.argmax(1) == target).sum())
            seen += target.shape[0]
            # Each batch says what was drawn for each row: here, whether noise was added.
            if NOISED in batch:
                noised += float(batch[NOISED].sum())
        val_accuracy = evaluate(model, val_loader, device)
        elapsed = time.perf_counter() - started
        row = {
            "epoch": epoch,
            "loss": total_loss / seen,
            "accuracy": correct / seen,
            "val_accuracy": val_accuracy,
            "records_per_s": (seen + held_out) / elapsed,
            "noised": noised / seen,
        }
        history.append(row)
        print(
            f"epoch {epoch}/{args.epochs}  loss {row['loss']:.4f}  accuracy {row['accuracy']:.3f}  "
            f"val_accuracy {row['val_accuracy']:.3f}  noised {row['noised']:.2f}  "
            f"({row['records_per_s']:.0f} records/s)",
            flush=True,
        )
    return history


@torch.no_grad()
def evaluate(model: nn.Module, loader: DataLoader, device: torch.device) -> float:
    model.eval()
    correct = seen = 0
    for batch in loader:
        target = batch["target"].to(device)
        correct += int((model(batch["inputs"].to(device)).argmax(1) == target).sum())
        seen += target.shape[0]
    return correct / seen


if __name__ == "__main__":
    main()
