"""Train a small modulation classifier with Ray Train, its data read by Ray Data from SDS.

Writes a labeled dataset of synthetic captures (what `sds-loader synth`
writes) with signal_dataset, starts Ray on this machine, and trains a 1-D
CNN with a `TorchTrainer` of `--workers` CPU workers. Every worker reads its
own share of each epoch through ``ray.train.get_dataset_shard("train")``:
`sds_loader.ray.read_sds` turns the dataset into Ray read tasks, a stretch
of shards each, that Ray's CPUs decode while the workers train.

    python examples/ray_train.py --records 4096 --epochs 3 --workers 2

On a cluster, point `--root` at the dataset in object storage (``s3://...``)
and drop `--cpus`: ``ray.init()`` joins the cluster, and each read task
opens the dataset on whatever node runs it.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Sequence
from typing import Any

import ray
import ray.train
import torch
from ray.train import RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer, prepare_model
from torch import nn

from sds_loader.cli.synthetic import MODULATIONS, write_captures
from sds_loader.ray import read_sds, to_complex


def classifier(classes: int = len(MODULATIONS)) -> nn.Module:
    """Conv1d stack over I and Q as two channels, pooled over time."""
    return nn.Sequential(
        nn.Conv1d(2, 32, kernel_size=7, padding=3),
        nn.ReLU(),
        nn.MaxPool1d(2),
        nn.Conv1d(32, 32, kernel_size=5, padding=2),
        nn.ReLU(),
        nn.AdaptiveAvgPool1d(1),
        nn.Flatten(),
        nn.Linear(32, classes),
    )


def train_loop(config: dict[str, Any]) -> None:
    """What each Ray Train worker runs: its shard of every epoch, through the model."""
    model = prepare_model(classifier())
    optimizer = torch.optim.Adam(model.parameters(), lr=config["lr"])
    loss_fn = nn.CrossEntropyLoss()
    shard = ray.train.get_dataset_shard("train")
    for epoch in range(config["epochs"]):
        total, correct, loss_sum = 0, 0, 0.0
        for batch in shard.iter_torch_batches(batch_size=config["batch_size"]):
            # complex64 (B, T) arrives as its float view (B, T, 2): back to complex, then I/Q channels.
            samples = to_complex(batch, ["samples"])["samples"]
            x = torch.view_as_real(samples).transpose(1, 2)
            labels = batch["label"]
            logits = model(x)
            loss = loss_fn(logits, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += labels.numel()
            correct += int((logits.argmax(1) == labels).sum())
            loss_sum += loss.item() * labels.numel()
        metrics = {"epoch": epoch, "loss": loss_sum / max(total, 1), "accuracy": correct / max(total, 1)}
        if ray.train.get_context().get_world_rank() == 0:
            # Each worker saw its own share of the epoch: rank 0's is printed.
            print(
                f"epoch {epoch + 1}/{config['epochs']}  loss {metrics['loss']:.4f}  "
                f"accuracy {metrics['accuracy']:.3f}  rows {total}",
                flush=True,
            )
        ray.train.report(metrics)


def cpu_workers(count: int) -> ScalingConfig:
    """`count` CPU workers; on Ray Train before version 2, without its trainer actor's CPU,
    which would otherwise leave the reads none on a small machine."""
    try:
        return ScalingConfig(num_workers=count, use_gpu=False, trainer_resources={"CPU": 0})
    except DeprecationWarning:  # version 2 holds no CPU beside the workers, and refuses the setting
        return ScalingConfig(num_workers=count, use_gpu=False)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--root", help="dataset root (written here when missing; default: a temporary folder)"
    )
    parser.add_argument("--records", type=int, default=2048, help="records to write")
    parser.add_argument("--length", type=int, default=512, help="samples per capture")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--workers", type=int, default=2, help="Ray Train workers (CPU)")
    parser.add_argument(
        "--cpus",
        type=int,
        default=None,
        help="logical CPUs of the local Ray instance (default: workers + 1, so reads are scheduled)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> ray.train.Result:
    args = parse(argv)
    scratch = tempfile.TemporaryDirectory()
    root = args.root or os.path.join(scratch.name, "captures")
    if not os.path.isdir(os.path.join(root, "objects")):
        write_captures(root, args.records, length=args.length, per_shard=256)
        print(f"wrote {args.records} captures to {root}")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=args.cpus or args.workers + 1, include_dashboard=False)
    try:
        trainer = TorchTrainer(
            train_loop,
            train_loop_config={"epochs": args.epochs, "batch_size": args.batch_size, "lr": args.lr},
            scaling_config=cpu_workers(args.workers),
            datasets={"train": read_sds(root, fields=["samples"], targets=["label"], shuffle=True)},
            run_config=RunConfig(storage_path=os.path.join(scratch.name, "runs"), name="sds-ray-train"),
        )
        return trainer.fit()
    finally:
        if started:
            ray.shutdown()
        scratch.cleanup()


if __name__ == "__main__":
    main()
