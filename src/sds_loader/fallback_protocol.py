"""How `fallback` and its helper process talk: pickled frames, each prefixed by its length.

Kept apart from both ends so that neither imports the other for it: the
client (`fallback`) imports this, and the helper (`fallback_helper`) imports
this and `fallback`, whose functions it serves.
"""

from __future__ import annotations

import pickle
import struct
from typing import IO, Any

_LENGTH = struct.Struct("<Q")


def send(stream: IO[bytes], value: object) -> None:
    payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(payload)))
    stream.write(payload)
    stream.flush()


def receive(stream: IO[bytes]) -> Any:
    """The next frame, or raise EOFError if the other side has gone."""
    header = stream.read(_LENGTH.size)
    if len(header) < _LENGTH.size:
        raise EOFError
    (length,) = _LENGTH.unpack(header)
    payload = stream.read(length)
    if len(payload) < length:
        raise EOFError
    return pickle.loads(payload)


def answerable(exc: BaseException) -> BaseException:
    """`exc` if it survives pickling, else a RuntimeError saying what it was."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - any pickling failure means the same
        return RuntimeError(f"{type(exc).__name__}: {exc}")
