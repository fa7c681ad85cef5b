"""A batch as one native read returned it: stacked tensors, also a sequence of samples.

`SDSTorchDataset.__getitems__` returns a `Batch`, so that a DataLoader's
collate either hands the stacked tensors on as they are (`collate`) or, with
torch's ``default_collate``, sees the sequence of samples it expects and
stacks them again into identical batches.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, SupportsIndex, overload

import torch as _torch
from torch.utils.data import default_collate as _default_collate

from sds_loader.torch.ring import RingBatch, _Block


class Batch(Sequence[dict[str, _torch.Tensor]]):
    """A batch read in one call: stacked tensors, also viewable as its samples.

    `collate` returns `tensors` as they are. Anything else that treats the
    batch as a sequence (``default_collate``, a custom collate_fn, ``list()``)
    sees one dict per sample whose tensors are views of row k, the same keys,
    dtypes, shapes and values that ``dataset[indices[k]]`` returns. Views are
    made on access, so a batch costs no Python work per record unless someone
    asks for its samples.
    """

    __slots__ = ("_tensors", "_length", "_ring_block", "_ragged", "_offsets_of")

    def __init__(
        self,
        tensors: Mapping[str, _torch.Tensor],
        length: int,
        *,
        ring_block: _Block | None = None,
        ragged: Mapping[str, object] | None = None,
        offsets_of: Mapping[str, str] | None = None,
    ) -> None:
        for name, tensor in tensors.items():
            if tensor.dim() == 0 or tensor.shape[0] != length:
                raise ValueError(
                    f"tensor {name!r} has shape {tuple(tensor.shape)}; every tensor of a "
                    f"batch of {length} needs {length} rows"
                )
        self._tensors = dict(tensors)
        self._length = length
        #: The worker ring block the tensors lie in, which `collate` passes on.
        self._ring_block = ring_block
        #: Values without one row per sample: ragged annotation items and their
        #: offsets (B + 1), record ids (a list of str).
        self._ragged: dict[str, object] = dict(ragged or {})
        #: Ragged items key -> the offsets key that cuts it into samples.
        self._offsets_of: dict[str, str] = dict(offsets_of or {})

    @property
    def tensors(self) -> dict[str, _torch.Tensor]:
        """The batch's values by key: stacked tensors with the batch as their first
        axis, then ragged annotation items with their offsets, and ids (a list)."""
        return {**self._tensors, **self._ragged}  # type: ignore[dict-item]

    def _sample(self, position: int) -> dict[str, Any]:
        sample: dict[str, Any] = {name: tensor[position] for name, tensor in self._tensors.items()}
        offsets_keys = set(self._offsets_of.values())
        for name, value in self._ragged.items():
            if name in offsets_keys:
                continue
            if name in self._offsets_of:
                offsets = self._ragged[self._offsets_of[name]]
                begin, end = int(offsets[position]), int(offsets[position + 1])  # type: ignore[index]
                sample[name] = value[begin:end]  # type: ignore[index]
            else:
                sample[name] = value[position]  # type: ignore[index]
        return sample

    def __len__(self) -> int:
        return self._length

    # A sample maps keys to tensors and, with ragged annotation fields or
    # record ids, to a row's items or its id: hence Any rather than Tensor.
    @overload
    def __getitem__(self, index: SupportsIndex) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, index: SupportsIndex | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return [self[k] for k in range(*index.indices(self._length))]
        position = operator.index(index)
        if position < 0:
            position += self._length
        if not 0 <= position < self._length:
            raise IndexError(f"sample {index} is out of range for a batch of {self._length}")
        return self._sample(position)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for position in range(self._length):
            yield self._sample(position)

    def __reduce__(self) -> tuple[object, ...]:
        # A batch in a worker's ring block crosses as the block and offsets,
        # even when a collate_fn hands the Batch itself to the DataLoader.
        if self._ragged:
            tensors = (
                RingBatch(self._tensors, self._ring_block) if self._ring_block is not None else self._tensors
            )
            return _batch_with_ragged, (tensors, self._length, self._ragged, self._offsets_of)
        if self._ring_block is not None:
            return _batch_of, (RingBatch(self._tensors, self._ring_block), self._length)
        return _batch_of, (self._tensors, self._length)

    def pin_memory(self, device: object = None) -> Batch:
        """Lets DataLoader's pin step handle a Batch that reaches it uncollated."""
        del device
        ragged = {
            name: v.pin_memory() if isinstance(v, _torch.Tensor) else v for name, v in self._ragged.items()
        }
        return Batch(
            {name: t.pin_memory() for name, t in self._tensors.items()},
            self._length,
            ragged=ragged,
            offsets_of=self._offsets_of,
        )

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{name}={str(t.dtype).removeprefix('torch.')}{list(t.shape)}"
            for name, t in self._tensors.items()
        )
        return f"Batch(size={self._length}, {shown})"


def _batch_of(tensors: Mapping[str, _torch.Tensor], length: int) -> Batch:
    return Batch(tensors, length)


def _batch_with_ragged(
    tensors: Mapping[str, _torch.Tensor],
    length: int,
    ragged: Mapping[str, object],
    offsets_of: Mapping[str, str],
) -> Batch:
    return Batch(tensors, length, ragged=ragged, offsets_of=offsets_of)


def collate(batch: object) -> object:
    """collate_fn that passes a `Batch` through as its dict of stacked tensors.

    Anything else (a list of samples, as wrappers without ``__getitems__`` such
    as ConcatDataset produce) goes to ``default_collate``, so this is safe as
    the collate_fn of any DataLoader.
    """
    if isinstance(batch, Batch):
        if batch._ring_block is not None:
            return RingBatch(batch.tensors, batch._ring_block)
        return batch.tensors
    return _default_collate(batch)  # type: ignore[arg-type]  # any sequence of samples


def stacked_and_ragged(batch: Batch) -> tuple[dict[str, _torch.Tensor], dict[str, object]]:
    """`batch`'s stacked tensors (one row per sample) and its ragged values, apart."""
    return batch._tensors, batch._ragged


def with_stacked(batch: Batch, stacked: Mapping[str, _torch.Tensor]) -> Batch:
    """`batch` with `stacked` as its stacked tensors: the same rows, ring block and ragged values."""
    return Batch(
        stacked, len(batch), ring_block=batch._ring_block, ragged=batch._ragged, offsets_of=batch._offsets_of
    )
