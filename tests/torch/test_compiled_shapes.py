"""A model under ``torch.compile(dynamic=False)`` compiles once per batch shape: with boundaries and
filled batches, at most once per boundary over two epochs; without them, once per distinct shape.

Compilations are counted by torch itself (dynamo's ``unique_graphs`` counter) and by a backend
that counts its calls and runs the graph as traced, so no C++ compiler is needed.
"""

from __future__ import annotations

from torch_required import torch

import pytest
from spread_records import BOUNDARIES, COUNT, write_spread
from torch.utils.data import DataLoader

from sds_loader import Boundaries, Window
from sds_loader.samplers.filled_batches import VALID_KEY
from sds_loader.torch import LengthBucketSampler, SDSTorchDataset, collate

#: Dynamo traces every shape it meets: a few seconds a test on two shared cores.
pytestmark = pytest.mark.slow

BATCH = 16
EPOCHS = 2


class Model(torch.nn.Module):
    """A convolution over time, masked by each row's valid length (and by `valid`, when given)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv1d(2, 4, 3, padding=1)

    def forward(self, inputs: torch.Tensor, lengths: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        features = self.conv(inputs.float())
        positions = torch.arange(inputs.shape[-1])
        inside = (positions[None, :] < lengths[:, None]) & valid[:, None]
        return (features * inside[:, None, :]).sum() / inside.sum().clamp(min=1)


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> str:
    return write_spread(tmp_path_factory.mktemp("compiled-shapes"))


def train(root: str, *, bounded: bool) -> tuple[int, int, set[tuple[int, ...]]]:
    """Two epochs through a compiled model: (the backend's calls, dynamo's unique graphs, shapes seen)."""
    boundaries = Boundaries(BOUNDARIES) if bounded else None
    dataset = SDSTorchDataset(root, window=Window("time", None, pad=True, boundaries=boundaries))
    sampler = LengthBucketSampler(
        dataset, BATCH, seed=0, boundaries=boundaries, fill="mask" if bounded else None
    )
    loader = DataLoader(dataset, batch_sampler=sampler, collate_fn=collate)
    compiles = 0

    def counting(graph: torch.fx.GraphModule, example_inputs: list[torch.Tensor]):
        nonlocal compiles
        compiles += 1
        return graph.forward

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    model = torch.compile(Model(), backend=counting, dynamic=False)
    seen = set()
    with torch._dynamo.config.patch(recompile_limit=256, accumulated_recompile_limit=1024), torch.no_grad():
        for epoch in range(EPOCHS):
            sampler.set_epoch(epoch)
            for batch in loader:
                valid = batch.get(VALID_KEY, torch.ones(batch["inputs"].shape[0], dtype=torch.bool))
                model(batch["inputs"], batch["inputs_length"], valid)
                seen.add(tuple(batch["inputs"].shape))
    return compiles, int(torch._dynamo.utils.counters["stats"]["unique_graphs"]), seen


def test_a_compiled_model_compiles_once_per_boundary_with_bounded_filled_batches(root):
    compiles, graphs, seen = train(root, bounded=True)
    assert compiles == graphs == len(seen)
    assert compiles <= len(BOUNDARIES)
    assert seen <= {(BATCH, 2, b) for b in BOUNDARIES}


def test_without_boundaries_it_compiles_once_per_distinct_shape(root):
    compiles, graphs, seen = train(root, bounded=False)
    assert compiles == graphs == len(seen)
    # About one shape per batch of an epoch (a pool holds the whole epoch here, so the
    # second epoch's batches reach the same longest records): several times the boundaries'.
    assert compiles >= 0.8 * -(-COUNT // BATCH)
    assert compiles > 2 * len(BOUNDARIES)
