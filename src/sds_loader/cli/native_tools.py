"""The native shard tools the command line uses, or a message saying why not.

`inspect`, `verify` and the benchmark's bounds call functions of the compiled
extension that the reading path does not need (shard summaries, whole-shard
verification, timed decompression). They are looked up here, by name, so that
a missing or older build fails with one sentence that says how to fix it,
rather than an AttributeError from deep inside a command.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

BUILD_HINT = (
    "build it with `pip install --no-build-isolation -e .` from the source tree "
    "(scripts/bootstrap.sh installs the compilers and libraries it needs)"
)


class NativeUnavailable(RuntimeError):
    """The extension, or one function of it, is not there to call.

    `short` is the same fact in a few words, for a table cell.
    """

    def __init__(self, message: str, short: str) -> None:
        super().__init__(message)
        self.short = short


def module() -> ModuleType:
    try:
        from sds_loader import _native
    except ImportError as exc:
        raise NativeUnavailable(
            f"sds-loader's native extension is not built ({exc}); {BUILD_HINT}",
            "native extension not built",
        ) from None
    return _native


def function(name: str) -> Any:
    """`sds_loader._native.<name>`, or NativeUnavailable naming what is missing."""
    native = module()
    found = getattr(native, name, None)
    if found is None:
        raise NativeUnavailable(
            f"this build of sds_loader._native has no {name}(); it is older than the "
            f"Python package, so rebuild it: {BUILD_HINT}",
            f"native extension has no {name}() (rebuild it)",
        )
    return found


def unavailable_reason(*names: str, short: bool = False) -> str | None:
    """Why the named functions cannot be called (in full, or `short`), or None if they all can."""
    try:
        for name in names:
            function(name)
    except NativeUnavailable as exc:
        return exc.short if short else str(exc)
    return None
