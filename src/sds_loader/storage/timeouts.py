"""How long a GET to object storage may take to connect, and stay silent, before its attempt fails.

A reader's `connect_timeout` and `read_timeout` reach the native source
through these, checked once. Each bounds one attempt, not a read: a stalled
attempt is retried as any other fault is, `max_attempts` attempts in all
(the store's setting), so a read gives up after at most about
`max_attempts * read_timeout` seconds of silence. The defaults (10 s to
connect, 30 s of silence, boto3's own read timeout) suit a store across the
internet; a store on the same network answers in milliseconds, and a job
that would rather fail over soon than wait may set them lower.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: Seconds a connection may take to open (its TCP and TLS handshakes).
DEFAULT_CONNECT_TIMEOUT = 10.0
#: Seconds an answer may stay silent (before its first byte, or between two).
DEFAULT_READ_TIMEOUT = 30.0


def checked_timeout(argument: str, value: object) -> float:
    """`value` as a timeout in seconds, or ValueError: a finite number above 0 (a bool is not one)."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or value <= 0:  # type: ignore[arg-type, operator]
        raise ValueError(f"{argument} must be a number of seconds above 0, not {value!r}")
    return float(value)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Timeouts:
    """A reader's connect and read timeouts for object storage, in seconds, both checked."""

    connect: float = DEFAULT_CONNECT_TIMEOUT
    read: float = DEFAULT_READ_TIMEOUT

    @classmethod
    def build(cls, connect_timeout: float | None, read_timeout: float | None) -> Timeouts:
        """The timeouts asked for (None: the default), raising ValueError naming a bad one."""
        connect = DEFAULT_CONNECT_TIMEOUT if connect_timeout is None else connect_timeout
        read = DEFAULT_READ_TIMEOUT if read_timeout is None else read_timeout
        return cls(checked_timeout("connect_timeout", connect), checked_timeout("read_timeout", read))
