"""An epoch number that DataLoader workers see change, persistent or not.

A dataset whose items depend on the epoch (random window crops) is copied
into each worker when the worker starts. Non-persistent workers start again
every epoch and copy the new number; persistent workers never do, so a plain
attribute set in the main process would leave them cropping epoch 0 for ever.
The number therefore lives in a word of shared memory, which forked workers
inherit and spawned ones receive as a handle while they start. Pickled any
other way (to disk, to another machine), it travels as its current value.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.context import get_spawning_popen
from typing import cast


class SharedEpoch:
    __slots__ = ("_shared",)

    def __init__(self, epoch: int = 0) -> None:
        self._shared = multiprocessing.RawValue("q", epoch)

    @property
    def value(self) -> int:
        return int(self._shared.value)

    @value.setter
    def value(self, epoch: int) -> None:
        self._shared.value = epoch

    def __getstate__(self) -> dict[str, object]:
        if get_spawning_popen() is not None:  # a worker being started: share the word
            return {"shared": self._shared}
        return {"epoch": self.value}

    def __setstate__(self, state: dict[str, object]) -> None:
        shared = state.get("shared")
        if shared is None:
            shared = multiprocessing.RawValue("q", int(cast(int, state["epoch"])))
        self._shared = shared
