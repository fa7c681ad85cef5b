"""Read stats and the loop's wait, reduced over torch.distributed ranks in one call.

Each rank has its own loader and its own `SDSTorchDataset.stats()`; what a
job read is their sum. `all_reduce_stats` adds every count and stage time of
every rank into one `ReadStats`, with one all_reduce of a float64 tensor
(counts stay exact below 2^53). `gather_ranks` collects each rank's wait for
data and its own reads, so that `InputReport.diagnosis()` speaks of the
ranks that wait: a job is as slow as its slowest rank, and what holds that
rank back (its stages, its workers or their absence) is read from its own
reads, not from every rank's summed.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.distributed as dist

from sds_loader import stage_times
from sds_loader.input_report import InputReport
from sds_loader.rank_share import RankShare
from sds_loader.read_stats import ReadStats, stage_array

_COUNTS = tuple(f.name for f in dataclasses.fields(ReadStats) if f.name != "_stage")


def _tensor(values: list[float]) -> torch.Tensor:
    # gloo reduces CPU tensors; nccl only CUDA ones, on the rank's own device.
    device = torch.device("cpu")
    if dist.get_backend() == "nccl":
        device = torch.device("cuda", torch.cuda.current_device())
    return torch.tensor(values, dtype=torch.float64, device=device)


def _values(stats: ReadStats) -> list[float]:
    """`stats` as floats: its counts, then its seconds per stage."""
    return [float(getattr(stats, name)) for name in _COUNTS] + [float(x) for x in stage_array(stats)]


def _stats(values: list[float]) -> ReadStats:
    """The `ReadStats` whose `_values` are `values`."""
    counts = {name: int(round(value)) for name, value in zip(_COUNTS, values, strict=False)}
    stages = stage_times.from_mapping(dict(zip(stage_times.STAGES, values[len(_COUNTS) :], strict=True)))
    return ReadStats(**counts, _stage=stages)


def all_reduce_stats(stats: ReadStats, group: dist.ProcessGroup | None = None) -> ReadStats:
    """The sum of `stats` over every rank of `group` (default: the world), on every rank."""
    if not (dist.is_available() and dist.is_initialized()):
        return stats.snapshot()
    tensor = _tensor(_values(stats))
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
    return _stats(tensor.cpu().tolist())


def gather_ranks(report: InputReport, group: dist.ProcessGroup | None = None) -> InputReport:
    """`report` with every rank's wait and reads (`ranks`), this rank's number (`rank`),
    and the job's reads summed over ranks (`reads`, `worker_reads`), in one all_gather."""
    if not (dist.is_available() and dist.is_initialized()):
        return report
    world = dist.get_world_size(group)
    width = len(_COUNTS) + len(stage_times.STAGES)
    has_reads = report.reads is not None
    mine = [float(report.steps), report.wait_seconds, report.loop_seconds, float(has_reads)]
    mine += _values(report.reads or ReadStats()) + _values(report.worker_reads or ReadStats())
    tensor = _tensor(mine)
    gathered = [torch.zeros_like(tensor) for _ in range(world)]
    dist.all_gather(gathered, tensor, group=group)
    ranks = []
    for rank, values in enumerate(one.cpu().tolist() for one in gathered):
        reads = workers = None
        if values[3]:
            reads, workers = _stats(values[4 : 4 + width]), _stats(values[4 + width :])
        ranks.append(RankShare(rank, int(values[0]), float(values[1]), float(values[2]), reads, workers))
    summed = worker_summed = None
    if has_reads:
        summed = sum((one.reads for one in ranks if one.reads is not None), ReadStats())
        worker_summed = sum((one.worker_reads for one in ranks if one.worker_reads is not None), ReadStats())
    return dataclasses.replace(
        report,
        ranks=tuple(ranks),
        rank=dist.get_rank(group),
        reads=summed,
        worker_reads=worker_summed,
    )
