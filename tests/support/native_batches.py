"""Read batches straight through `_native.ShardSet`, below BatchReader.

For tests of the native core's own machinery (its shard sources, its worker
threads, fork handling) that need one ShardSet object across calls and
processes, which BatchReader deliberately hides.
"""

from __future__ import annotations

import numpy as np
import signal_dataset as sds
from native_required import _native

from sds_loader.dataset import ShardTable, shard_table
from sds_loader.schema import numpy_dtype


def open_native(root: str, **kwargs) -> tuple[object, ShardTable]:
    """A ShardSet over `root`'s shards (kwargs: source=...), and where each ordinal lives."""
    table = shard_table(sds.open(root))
    native = _native.ShardSet(list(table.paths), True, 8, **kwargs)
    # These small records would not wake a helper: the tests are about the helpers.
    native.work_per_helper = 0
    return native, table


def native_read(
    native, table: ShardTable, ordinals: list[int], threads: int, target: str = "label"
) -> dict[str, np.ndarray]:
    """Every field of `ordinals` and their integer `target`, read natively."""
    wanted = np.asarray(ordinals, dtype=np.int64)
    files, shard_records = table.locate(wanted)
    fields, _ = native.probe(int(files[0]), int(shard_records[0]), int(wanted[0]))
    batch: dict[str, np.ndarray] = {}
    layout = _native.BatchLayout()
    for name, key, dtype, shape in fields:
        batch[name] = np.zeros((len(ordinals), *shape), dtype=numpy_dtype(dtype))
        layout.add_field(name, key, dtype, tuple(shape))
    batch[target] = np.zeros(len(ordinals), dtype=np.int64)
    layout.add_target(target, "i")
    fallback = native.read(files, shard_records, wanted, layout, batch, threads)
    assert not fallback.any()
    return batch
