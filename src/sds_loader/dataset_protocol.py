"""What the layers over the reader may ask of a dataset, beside ``len()`` and its reads.

Samplers, the Ray datasource, the PyTorch dataset and the benchmark need a
little more of a dataset than its records: where each ordinal lives (to
order a sampler's indices by shard and chunk without opening the dataset
again, which in object storage is several requests one after another), and,
for the benchmark, the reader's state in this process (its open shards'
source and the native reader). These protocols name that, so that no layer
reaches into another's private members; `BatchReader` provides both, and
`SDSTorchDataset` the first.

Everything here is of this process: a forked or spawned process opens its
own state on first use, and what these return must not be handed to
another process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from sds_loader.dataset import ShardTable
    from sds_loader.process_state import ProcessState


@runtime_checkable
class ShardAddressed(Protocol):
    """A dataset that knows where each of its records lives."""

    @property
    def uri(self) -> str:
        """The dataset's root, as the reader was given it."""
        ...

    def shard_table(self) -> ShardTable | None:
        """Each ordinal's shard and record within it, as this process's reader finds them
        (`ShardTable.locate`); None when signal_dataset's reader serves every record."""
        ...


@runtime_checkable
class ProcessLocal(Protocol):
    """A reader whose state in this process (open dataset, shards, source) may be looked at."""

    def process_state(self) -> ProcessState:
        """This process's state, opened on first use (in object storage, requests)."""
        ...

    def opened_state(self) -> ProcessState | None:
        """This process's state if it is open already, else None; never opens it."""
        ...
