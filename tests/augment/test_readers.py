"""A chain given to the other readers: Mixture members, and sds_loader.ray's read tasks, deliver
each row as a BatchReader with the same seed reads it in that epoch."""

from __future__ import annotations

from torch_required import torch  # noqa: F401 - skips without torch

import pickle

import numpy as np
import pytest
from native_required import _native  # noqa: F401

from sds_loader import BatchReader
from sds_loader.augment import Chain, FrequencyShift, Noise, Phase, TimeShift
from sds_loader.torch import Mixture, SDSTorchDataset, collate

CHAIN = Chain([Phase(), FrequencyShift(hz=(-1e5, 1e5)), TimeShift(samples=(-32, 32)), Noise(snr_db=(0, 20))])


def reference(root: str, seed: int, epoch: int, ordinals: list[int]) -> dict[str, np.ndarray]:
    reader = BatchReader(root, fields=("samples",), augment=Chain(CHAIN.transforms, seed=seed))
    return reader.read(ordinals, epoch=epoch)


def test_mixture_members_augment_their_rows(captures: str) -> None:
    members = [
        SDSTorchDataset(captures, target="label", augment=CHAIN, seed=1),
        SDSTorchDataset(captures, target="label", augment=Chain(CHAIN.transforms, seed=9)),
    ]
    mixed = Mixture(members, [1, 1])
    assert set(mixed.keys) >= {"inputs", "target", "augment.3.noise.sigma2"}
    mixed.set_epoch(4)
    count = len(members[0])
    indices = [0, count + 5, 3, count + 0, 7]
    batch = collate(mixed.__getitems__(indices))
    first = reference(captures, 1, 4, [0, 3, 7])
    second = reference(captures, 9, 4, [5, 0])
    rows = {0: (first, 0), count + 5: (second, 0), 3: (first, 1), count + 0: (second, 1), 7: (first, 2)}
    for k, index in enumerate(indices):
        want, row = rows[index]
        assert batch["inputs"][k].numpy().tobytes() == want["samples"][row].tobytes()
        assert batch["augment.3.noise.sigma2"][k].item() == want["augment.3.noise.sigma2"][row]
    assert (
        collate(pickle.loads(pickle.dumps(mixed)).__getitems__(indices))["inputs"].numpy().tobytes()
        == batch["inputs"].numpy().tobytes()
    )


def test_ray_read_tasks_augment_each_pass_under_its_epoch(captures: str) -> None:
    pytest.importorskip("ray.data", reason="Ray Data is not installed: pip install 'sds-loader[ray]'")
    from sds_loader.ray import SDSDatasource

    for epoch in (0, 2):
        source = SDSDatasource(captures, fields=["samples"], augment=CHAIN, seed=6, epoch=epoch)
        tables = [table for task in source.get_read_tasks(2) for table in pickle.loads(pickle.dumps(task))()]
        ordinals = [o for table in tables for o in table.column("ordinal").to_pylist()]
        want = reference(captures, 6, epoch, ordinals)
        sigma2 = [v for table in tables for v in table.column("augment.3.noise.sigma2").to_pylist()]
        np.testing.assert_array_equal(sigma2, want["augment.3.noise.sigma2"])
        samples = np.concatenate(
            [chunk.to_numpy() for table in tables for chunk in table.column("samples").chunks]
        )
        assert samples.tobytes() == want["samples"].view(np.float32).tobytes()
