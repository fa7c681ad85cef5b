"""The names of a dataset's shard files, kept as digests where signal_dataset's layout allows.

signal_dataset stores every shard it writes at
`<root>/objects/<kind>/<first digest byte, hex>/<digest, hex>.arrayrecord`:
the path is the root, the kind and a 32-byte digest. Kept as Python strings,
a million such paths cost some 200 MB in every process that opens the
dataset; kept as digests, 32 MB. `ShardNames` holds either form and gives a
path only when one is asked for (a message, a shard opened for the first
time, object storage's URLs), and hands the native core the same compact form.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

#: Bytes of the digest a shard is named by.
DIGEST_BYTES = 32
SUFFIX = ".arrayrecord"


class ShardNames(Sequence[str]):
    """Shard paths: explicit strings, or a root, a kind and one digest per shard."""

    def __init__(
        self,
        paths: Sequence[str] | None = None,
        *,
        root: str = "",
        kind: str = "",
        digests: np.ndarray | None = None,
    ) -> None:
        if (paths is None) == (digests is None):
            raise ValueError("ShardNames takes paths, or a root, a kind and digests")
        self._paths = tuple(paths) if paths is not None else None
        self._digests = None if digests is None else np.ascontiguousarray(digests, dtype=np.uint8)
        if self._digests is not None and (self._digests.ndim != 2 or self._digests.shape[1] != DIGEST_BYTES):
            raise ValueError(f"digests must be rows of {DIGEST_BYTES} bytes")
        self._prefix = f"{root.rstrip('/')}/objects/{kind}/"

    @property
    def compact(self) -> bool:
        """Whether the names are kept as digests."""
        return self._digests is not None

    @property
    def prefix(self) -> str:
        """What every compact path begins with: `<root>/objects/<kind>/`."""
        return self._prefix

    @property
    def digests(self) -> np.ndarray:
        assert self._digests is not None, "explicit names have no digests"
        return self._digests

    def __len__(self) -> int:
        return len(self._paths) if self._paths is not None else len(self.digests)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[k] for k in range(*index.indices(len(self)))]
        if self._paths is not None:
            return self._paths[index]
        digest = self.digests[index].tobytes().hex()
        return f"{self._prefix}{digest[:2]}/{digest}{SUFFIX}"

    def __iter__(self) -> Iterator[str]:
        if self._paths is not None:
            return iter(self._paths)
        return (self[k] for k in range(len(self)))

    def native_arguments(self) -> dict[str, Any]:
        """How the native `ShardSet` takes these names: paths, or a prefix and digests.

        The set borrows the digests (and keeps them alive) rather than
        copying them: 32 bytes a shard less in each set.
        """
        if self._paths is not None:
            return {"paths": list(self._paths)}
        return {"paths": [], "prefix": self._prefix, "digests": self.digests}

    @property
    def held_bytes(self) -> int:
        """Bytes these names keep (the strings', or the digests')."""
        if self._paths is not None:
            return sum(len(path) + 49 for path in self._paths) + 8 * len(self._paths)
        return int(self.digests.nbytes)

    def __reduce__(self) -> tuple[Any, ...]:
        if self._paths is not None:
            return (ShardNames, (self._paths,))
        root, _, kind = self._prefix.rstrip("/").rpartition("/objects/")
        return (_compact, (root, kind, self.digests.tobytes()))


def _compact(root: str, kind: str, digests: bytes) -> ShardNames:
    rows = np.frombuffer(digests, dtype=np.uint8).reshape(-1, DIGEST_BYTES)
    return ShardNames(root=root, kind=kind, digests=rows)
