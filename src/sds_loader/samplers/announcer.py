"""Announcing upcoming records from a thread of their own, off the training loop's path.

Asking the kernel to read ahead is not free: ``posix_fadvise(WILLNEED)``
allocates the page-cache pages and queues the reads before it returns, about
4 ms per 16 MiB here. Made from the loop that also reads the current batch,
that time is added to every batch; made from a thread with the GIL released,
it overlaps the batch's decoding instead. One thread per announcer, started
on the first announcement (and again in a forked child, which has no copy of
it); announcements are made in the order given.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Sequence


class Announcer:
    """Calls `announce(items)` for each `submit(items)` on a daemon thread, in order.

    An exception `announce` raises is raised again by the next `submit` (or
    `flush`), so a hint that cannot work is reported rather than lost.
    """

    def __init__(self, announce: Callable[[Sequence[int]], object]) -> None:
        self._announce = announce
        self._pending: queue.SimpleQueue[Sequence[int] | None] | None = None
        self._pid = -1
        self._error: BaseException | None = None
        self._idle = threading.Event()

    def submit(self, items: Sequence[int]) -> None:
        self._raise_pending_error()
        if self._pending is None or self._pid != os.getpid():
            self._start()
        assert self._pending is not None
        self._idle.clear()
        self._pending.put(items)

    def flush(self) -> None:
        """Waits until every submitted announcement has been made."""
        if self._pending is not None and self._pid == os.getpid():
            self._pending.put(None)
            self._idle.wait()
        self._raise_pending_error()

    def _start(self) -> None:
        self._pending = queue.SimpleQueue()
        self._pid = os.getpid()
        self._idle = threading.Event()
        threading.Thread(target=self._serve, args=(self._pending, self._idle), name="sds-loader-readahead",
                         daemon=True).start()

    def _serve(self, pending: queue.SimpleQueue, idle: threading.Event) -> None:
        while True:
            items = pending.get()
            if items is None:
                if pending.empty():
                    idle.set()
                continue
            try:
                self._announce(items)
            except BaseException as error:  # noqa: BLE001 - handed to the submitting thread
                if self._error is None:
                    self._error = error

    def _raise_pending_error(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error

    def __getstate__(self) -> dict[str, object]:
        # The thread and its queue stay in this process; a copy starts its own.
        return {"_announce": self._announce}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__init__(state["_announce"])  # type: ignore[misc]
