"""How a reader, or a dataset made over one, crosses a pickle to a spawned process.

What belongs to this process (its open dataset, descriptors, connections,
the lock) stays behind and is made again on first use there. Two things go
along that the other process could not rebuild as cheaply: the store's
settings, not the store (a spawned process cannot unpickle a client, and
needs the endpoint even when it came from this process's registry), and the
shard tables this process built (a few dozen bytes a shard), so that it does
not read every manifest page again; a forked process finds them in the
memory it shares with its parent. For a spawned process the tables travel
beside the pickle, in a file (`spawn_tables` says why: a large pickle holds
the parent until the child has imported torch).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from signal_dataset.storage import ObjectStore, S3Options

from sds_loader import spawn_tables
from sds_loader.dataset import adopt_tables, export_tables
from sds_loader.storage.stores import portable

if TYPE_CHECKING:
    from signal_dataset import Dataset

#: The key of the shard tables in a pickled state (not an attribute of the object).
TABLES = "_tables"


def outgoing(
    attributes: Mapping[str, object], *, left_behind: Mapping[str, object], opened: Dataset | None
) -> dict[str, object]:
    """The state to pickle: `attributes`, with `left_behind` replacing what is this process's
    (its state set to None, its store to `portable_store`'s), and the `opened` dataset's tables."""
    state = dict(attributes)
    state.update(left_behind)
    state[TABLES] = spawn_tables.parcel(export_tables(opened) if opened is not None else {})
    return state


def portable_store(store: ObjectStore | S3Options | None) -> ObjectStore | S3Options | None:
    """What of `store` crosses to another interpreter (see `storage.stores.portable`)."""
    return store if isinstance(store, S3Options) else portable(store)


def incoming(state: dict[str, object]) -> dict[str, object]:
    """The attributes of a pickled `state`, once the shard tables it carries are adopted."""
    adopt_tables(spawn_tables.unpack(state.pop(TABLES, None)))
    return state
