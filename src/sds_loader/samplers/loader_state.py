"""A sampler's own state, taken out of a torchdata ``StatefulDataLoader``'s state.

``StatefulDataLoader.load_state_dict`` refuses a state saved with another
``num_workers`` (the workers' states are saved one per worker). A
sampler's state names no worker, so a loader with any number of workers
resumes from it: make the new loader, and load the sampler's state into the
sampler instead of the loader's into the loader::

    sampler.load_state_dict(sampler_state(checkpoint))

The loader's state holds the sampler's as of the last batch the loader
handed out, which is the state to resume from; with workers the sampler
itself has run ahead of that batch. A sampler given as ``batch_sampler=``
is saved as the loader's index sampler, one given as ``sampler=`` inside
the state of the batch sampler torchdata wraps it in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sds_loader.samplers.contract import STATE_KEYS


def _is_sampler_state(value: object) -> bool:
    return isinstance(value, Mapping) and set(STATE_KEYS) <= set(value)


def sampler_state(loader_state: Mapping[str, Any]) -> dict[str, Any]:
    """The sampler's state inside `loader_state`, a ``StatefulDataLoader.state_dict()``.

    For `load_state_dict` of an sds-loader sampler (`ShardAwareSampler`,
    `LengthBucketSampler`, `MixtureSampler`) on a loader with any number of
    workers, on any world size.
    """
    if not isinstance(loader_state, Mapping):
        raise TypeError(
            f"sampler_state takes a StatefulDataLoader.state_dict(), not a {type(loader_state).__name__}"
        )
    main: object = loader_state
    if "_snapshot" in loader_state:  # a loader with workers: the state as of its last batch
        if loader_state.get("_steps_since_snapshot", 0):
            raise ValueError(
                f"this loader state is {loader_state['_steps_since_snapshot']} batches past its last "
                "snapshot of the sampler; save it from a StatefulDataLoader with snapshot_every_n_steps=1 "
                "(the default) to resume with another number of workers"
            )
        main = loader_state["_snapshot"].get("_main_snapshot")
    if isinstance(main, Mapping):
        index_sampler = main.get("_index_sampler_state")
        if _is_sampler_state(index_sampler):  # batch_sampler=
            return dict(index_sampler)  # type: ignore[arg-type]
        batches = main.get("_sampler_iter_state")
        if isinstance(batches, Mapping) and _is_sampler_state(batches.get("sampler_state")):  # sampler=
            return dict(batches["sampler_state"])
    raise ValueError(
        "this loader state holds no sds-loader sampler's state: save it with "
        "StatefulDataLoader.state_dict() from a loader whose sampler= or batch_sampler= is a "
        "ShardAwareSampler, LengthBucketSampler or MixtureSampler"
    )
