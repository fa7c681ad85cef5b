"""A DataLoader worker_init_fn that fails the worker if it reads a dataset's manifests again.

For the tests that a worker, forked or spawned, takes the shard tables its
parent built: the table builder is replaced with one that raises, so a
worker that tabulates the dataset itself fails its batch.
"""

from __future__ import annotations


def refuse_manifest_reads(worker_id: int) -> None:
    from sds_loader import dataset as addressing

    def built_again(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"worker {worker_id} read the manifests again")

    addressing._build = built_again  # type: ignore[assignment]
