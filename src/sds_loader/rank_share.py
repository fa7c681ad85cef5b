"""One rank's wait for data and its own reads, as `gather_ranks` collects them for the report."""

from __future__ import annotations

from dataclasses import dataclass

from sds_loader.read_stats import ReadStats


@dataclass(frozen=True)
class RankShare:
    """One rank's wait for data, and that rank's own reads (None without a stats source)."""

    rank: int
    steps: int
    wait_seconds: float
    loop_seconds: float
    #: The rank's reads (its process and its DataLoader workers), and the workers' part:
    #: what says where a waiting rank's reading goes, whatever the other ranks do.
    reads: ReadStats | None = None
    worker_reads: ReadStats | None = None

    @property
    def wait_share(self) -> float:
        return self.wait_seconds / self.loop_seconds if self.loop_seconds > 0 else 0.0
