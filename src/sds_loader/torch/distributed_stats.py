"""Read stats and the loop's wait, reduced over torch.distributed ranks in one call.

Each rank has its own loader and its own `SDSTorchDataset.stats()`; what a
job read is their sum. `all_reduce_stats` adds every count and stage time of
every rank into one `ReadStats`, with one all_reduce of a float64 tensor
(counts stay exact below 2^53). `gather_ranks` collects each rank's wait for
data, so that `InputReport.diagnosis()` names the rank that waits most: a
job is as slow as its slowest rank.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.distributed as dist

from sds_loader import stage_times
from sds_loader.input_report import InputReport, RankShare
from sds_loader.read_stats import ReadStats, stage_array

_COUNTS = tuple(f.name for f in dataclasses.fields(ReadStats) if f.name != "_stage")


def _tensor(values: list[float]) -> torch.Tensor:
    # gloo reduces CPU tensors; nccl only CUDA ones, on the rank's own device.
    device = torch.device("cpu")
    if dist.get_backend() == "nccl":
        device = torch.device("cuda", torch.cuda.current_device())
    return torch.tensor(values, dtype=torch.float64, device=device)


def all_reduce_stats(stats: ReadStats, group: dist.ProcessGroup | None = None) -> ReadStats:
    """The sum of `stats` over every rank of `group` (default: the world), on every rank."""
    if not (dist.is_available() and dist.is_initialized()):
        return stats.snapshot()
    values = [float(getattr(stats, name)) for name in _COUNTS] + stage_array(stats).tolist()
    tensor = _tensor(values)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
    summed = tensor.cpu().tolist()
    counts = {name: int(round(value)) for name, value in zip(_COUNTS, summed, strict=False)}
    stages = stage_times.from_mapping(dict(zip(stage_times.STAGES, summed[len(_COUNTS) :], strict=True)))
    return ReadStats(**counts, _stage=stages)


def gather_ranks(report: InputReport, group: dist.ProcessGroup | None = None) -> InputReport:
    """`report` with every rank's wait (`ranks`) and the job's reads summed over ranks."""
    if not (dist.is_available() and dist.is_initialized()):
        return report
    world = dist.get_world_size(group)
    mine = _tensor([float(report.steps), report.wait_seconds, report.loop_seconds])
    gathered = [torch.zeros_like(mine) for _ in range(world)]
    dist.all_gather(gathered, mine, group=group)
    ranks = tuple(
        RankShare(rank, int(values[0]), float(values[1]), float(values[2]))
        for rank, values in enumerate(tensor.cpu().tolist() for tensor in gathered)
    )
    reads = all_reduce_stats(report.reads, group) if report.reads is not None else None
    workers = all_reduce_stats(report.worker_reads, group) if report.worker_reads is not None else None
    return dataclasses.replace(report, ranks=ranks, reads=reads, worker_reads=workers)
