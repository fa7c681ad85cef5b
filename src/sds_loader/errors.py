"""Exceptions sds-loader raises, rooted in signal_dataset's own hierarchy.

Corruption derives from `signal_dataset.CorruptDatasetError` so that code
already written against signal_dataset catches ours without change. Argument
errors derive from the builtin a caller would expect (`ValueError`), so that a
bad batch is never mistaken for a bad dataset.
"""

from __future__ import annotations

from signal_dataset import CorruptDatasetError

# Raised by the native core for object storage, as signal_dataset raises it.
from signal_dataset import StorageError as StorageError


class CorruptShardError(CorruptDatasetError):
    """A shard's bytes fail a hash, a bound or a format check.

    The message names the shard file and the ordinal being read. Nothing read
    from such a shard is returned: the batch that met it raises as a whole.
    """


class UnsafePathError(CorruptDatasetError):
    """A shard's local path is one a dataset may not use: signal_dataset refuses it too.

    Below a dataset's root, no path component may be a symbolic link and every
    shard must be a regular file, as signal_dataset's confined local store
    requires. Otherwise a dataset handed to a training job could make it read
    any file on the machine as records (a shard linked to one elsewhere), or
    wait forever (a FIFO where a shard should be). The message names the path;
    the fix is to copy the real files into the dataset, or publish it again.
    A `ValueError`, as signal_dataset's own refusal is.
    """


class MixedShapesError(ValueError):
    """One batch holds records whose selected fields differ in shape or dtype.

    A batch is one array per field, so every record in it must agree. Read such
    records in separate batches, select only the fields that agree, or use a
    sampler that groups records by shape.
    """


class TargetError(ValueError):
    """A requested target is missing from a record's metadata or is not a scalar."""


class UnknownNameError(ValueError):
    """A field or metadata key the caller selected is not in the record read.

    Raised when the reader is made (from record 0) or when a batch meets a
    record without it. The message names the argument that selected it
    (`argument`, such as ``"fields="``) and the names the record does carry
    (`available`), so that the fix is a matter of picking one of them.
    """

    kind = "field"

    def __init__(self, *, argument: str, name: str, available: list[str], ordinal: int, uri: str) -> None:
        self.argument = argument
        self.name = name
        self.available = sorted(available)
        self.ordinal = ordinal
        self.uri = uri
        shown = ", ".join(map(repr, self.available)) or "none"
        super().__init__(
            f"{argument} names {name!r}, but record {ordinal} of {uri} has no {self.kind} "
            f"{name!r}; its {self.kind}s are {shown}. Pass {argument} with one of those."
        )

    def passed_as(self, argument: str) -> UnknownNameError:
        """The same error, naming the argument as the caller spelled it (``"inputs="``, say)."""
        return type(self)(
            argument=argument, name=self.name, available=self.available, ordinal=self.ordinal, uri=self.uri
        )


class UnknownTargetError(UnknownNameError, TargetError):
    """A target key the caller selected is not in the record's metadata."""

    kind = "metadata key"


class SchemaMismatch(Exception):
    """Raised by the native core when a record disagrees with the assumed schema.

    Internal: the reader catches it, learns the batch's real schema, and either
    reads again or raises `MixedShapesError`. It never reaches a caller.
    """
