"""A process that reports the shared epoch it was started with, each time it is asked.

Kept apart from the tests so that a spawned child imports nothing heavier."""

from __future__ import annotations


def report_epochs(epoch, requests, replies) -> None:  # type: ignore[no-untyped-def]
    while requests.get() is not None:
        replies.put(epoch.value)
