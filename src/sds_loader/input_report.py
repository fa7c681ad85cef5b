"""What a pass of a training loop waited for its data (`InputWatch.report()`)."""

from __future__ import annotations

from dataclasses import dataclass

from sds_loader import input_diagnosis
from sds_loader.rank_share import RankShare
from sds_loader.read_stats import ReadStats


@dataclass(frozen=True)
class InputReport:
    """What one pass over the batches waited for, and where the reads' time went."""

    #: Batches delivered.
    steps: int
    #: Time inside next() for each batch, and from each batch to the next (the step).
    waits: tuple[float, ...]
    step_seconds: tuple[float, ...]
    #: The reads made meanwhile (every process, when the source sums its workers;
    #: every rank's, once gathered), and the DataLoader workers' part of them;
    #: None without a stats source.
    reads: ReadStats | None = None
    worker_reads: ReadStats | None = None
    #: One entry per rank when gathered over torch.distributed (`gather_ranks`),
    #: and the rank this report was taken on.
    ranks: tuple[RankShare, ...] = ()
    rank: int | None = None

    @property
    def first_wait(self) -> float:
        """The wait for the first batch: start-up (workers, shard opening), not left out."""
        return self.waits[0] if self.waits else 0.0

    @property
    def wait_seconds(self) -> float:
        """Waiting after the first batch, the steady part the share is taken of."""
        return sum(self.waits[1:])

    @property
    def loop_seconds(self) -> float:
        """The loop's time after the first batch arrived: every later step."""
        return sum(self.step_seconds)

    @property
    def wait_share(self) -> float:
        """The share of the loop's time (after the first batch) spent waiting for data."""
        return self.wait_seconds / self.loop_seconds if self.loop_seconds > 0 else 0.0

    def diagnosis(self) -> str:
        """One paragraph in words: input-bound or not, on which stage and where, and what helps."""
        return input_diagnosis.diagnose(
            steps=self.steps,
            wait_share=self.wait_share,
            mean_step=self.loop_seconds / max(len(self.step_seconds), 1),
            first_wait=self.first_wait,
            ranks=self.ranks,
            rank=self.rank,
            reads=self.reads,
            worker_reads=self.worker_reads,
        )
