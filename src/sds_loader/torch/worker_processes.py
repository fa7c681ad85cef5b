"""Whether a DataLoader worker's process is still there, for what its memory or slot holds."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """Whether process `pid` exists (another user's counts: it may not be signalled, but it is there)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
