"""Several SDS datasets as one, mixed by weight, each batch still read natively.

Training sets are seldom one recording campaign. A `Mixture` puts several
`SDSTorchDataset`s (local or in object storage, each with its own fields,
targets, window and threads) behind one index space, their concatenation:
member k's record j is ``offsets[k] + j``. The weights say how often each
member is drawn; `sds_loader.samplers.MixtureSampler` turns them into batches.

A batch is read the way `SDSTorchDataset` reads one: its output tensors are
allocated once, in the memory the batch is delivered in (a worker's ring
block, the page pool, pinned memory), and each member's part of the batch is
one native read of that member. Where a member's part lands matters:

- When a member's rows are one stretch of the batch (as every batch of
  `MixtureSampler` is laid out: member 0's rows, then member 1's, ...), the
  member reads straight into that stretch of the final tensors. Nothing is
  copied, so a mixture batch costs what its members' parts cost alone.
- When a member's rows are scattered (a batch from ``shuffle=True``, say),
  the member still reads its part in one call, into scratch, and the rows
  are then moved into place: one more copy of each of that member's rows.
  Reading straight into scattered rows would need the native reader to take
  an output row per record, which it does not (yet).

Rows always come back in the order asked.

Annotation rows, class labels and ``extras=`` given to the members arrive in
mixed batches too, when every member delivers the same keys (checked when the
mixture is made, like the fields): values with one row per record are read
into their rows like fields, and ragged annotation items and ids are merged in
batch order (`sds_loader.torch.extras`), so each set's offsets cut the batch's
items as they would one member's.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, cast

import numpy as np
import torch as _torch
from torch.utils.data import Dataset as _Dataset
from torch.utils.data import get_worker_info as _get_worker_info

from sds_loader.indices import normalize
from sds_loader.schema import Allocator
from sds_loader.torch.batch import Batch
from sds_loader.torch.buffers import BufferSource, read_tensors
from sds_loader.torch.dataset import SDSTorchDataset, buffer_source, read_rows_into
from sds_loader.torch.extras import merge_ragged
from sds_loader.torch.mixture_layout import agreed_layout
from sds_loader.torch.ring import DEFAULT_BLOCKS

if TYPE_CHECKING:
    from sds_loader.torch.ring import _Block

__all__ = ["Mixture"]


class _ProcessLocal:
    """The buffer source of one process; never pickled, never inherited."""

    __slots__ = ("pid", "source")

    def __init__(self, pid: int, source: BufferSource) -> None:
        self.pid = pid
        self.source = source


class Mixture(_Dataset[dict[str, _torch.Tensor]]):
    """Map-style dataset over several `SDSTorchDataset`s: their concatenation, mixed by weight.

    ``mixture[offsets[k] + j]`` is ``datasets[k][j]``; ``len(mixture)`` is
    the sum of the members' lengths. `weights` (non-negative, normalised to
    sum to 1) and `epoch_size` (records per epoch, by default the members'
    total) are what `MixtureSampler` draws by, and `seed` is its default
    seed; the dataset itself reads whatever indices it is given, so torch's
    own samplers also work (without the weights).

    Every member must deliver the same keys with the same dtypes and row
    shapes, since a batch is one tensor per key: map keys with each member's
    ``inputs=``/``target=``/``fields=``/``targets=``, and give members whose
    captures differ in length a `sds_loader.Window` of one length. The layout
    is checked here, from each member's first record, so a mismatch fails
    before any DataLoader starts.

    `pin_memory` and `worker_blocks` say where batches are written, as for
    `SDSTorchDataset` (the members' own settings of these are not used: a
    mixture batch is one allocation). Pickling drops the process-local
    buffers, and members reopen their readers in each worker, so fork and
    spawn workers, persistent or not, all work.
    """

    def __init__(
        self,
        datasets: Sequence[SDSTorchDataset],
        weights: Sequence[float],
        *,
        seed: int = 0,
        epoch_size: int | None = None,
        pin_memory: bool = False,
        worker_blocks: int = DEFAULT_BLOCKS,
    ) -> None:
        if isinstance(datasets, SDSTorchDataset | str | bytes) or not isinstance(datasets, Sequence):
            raise TypeError(
                "datasets must be a sequence of SDSTorchDataset, one per member, not "
                f"{type(datasets).__name__}"
            )
        if not datasets:
            raise ValueError("a Mixture needs at least one dataset")
        for position, dataset in enumerate(datasets):
            if not isinstance(dataset, SDSTorchDataset):
                raise TypeError(
                    f"member {position} is a {type(dataset).__name__}, not an SDSTorchDataset; "
                    "wrap a URI as sds_loader.torch.SDSTorchDataset(uri, ...)"
                )
        self._datasets: tuple[SDSTorchDataset, ...] = tuple(datasets)
        self._weights = _normalised_weights(weights, len(self._datasets))
        lengths = [len(dataset) for dataset in self._datasets]
        for position, length in enumerate(lengths):
            if length == 0:
                raise ValueError(
                    f"member {position} ({self._datasets[position].uri}) holds no records; leave it out"
                )
        #: offsets[k] is member k's first index; offsets[-1] the mixture's length.
        self._offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        self._offsets.setflags(write=False)
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, not {seed!r}")
        self._seed = seed
        if epoch_size is None:
            epoch_size = int(self._offsets[-1])
        if isinstance(epoch_size, bool) or not isinstance(epoch_size, int) or epoch_size < 1:
            raise ValueError(f"epoch_size must be a positive integer or None, not {epoch_size!r}")
        self._epoch_size = epoch_size
        if isinstance(worker_blocks, bool) or not isinstance(worker_blocks, int) or worker_blocks < 0:
            raise ValueError(f"worker_blocks must be zero or a positive integer, not {worker_blocks!r}")
        self._pin_memory = bool(pin_memory)
        self._worker_blocks = worker_blocks
        self._layout, self._ragged = agreed_layout(self._datasets)
        self._local: _ProcessLocal | None = None

    # -- process-local state ------------------------------------------------

    def _source(self) -> BufferSource:
        local = self._local
        pid = os.getpid()
        if local is None or local.pid != pid:
            source = buffer_source(
                _get_worker_info() is not None, pin_memory=self._pin_memory, worker_blocks=self._worker_blocks
            )
            local = _ProcessLocal(pid, source)
            self._local = local
        return local.source

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        state["_local"] = None
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._local = None

    # -- public surface -----------------------------------------------------

    @property
    def datasets(self) -> tuple[SDSTorchDataset, ...]:
        return self._datasets

    @property
    def weights(self) -> tuple[float, ...]:
        """The members' weights, normalised to sum to 1."""
        return self._weights

    @property
    def offsets(self) -> np.ndarray:
        """Member k's records are indices ``offsets[k]`` to ``offsets[k + 1] - 1`` (read-only)."""
        return self._offsets

    @property
    def seed(self) -> int:
        return self._seed

    @property
    def epoch_size(self) -> int:
        """Records per epoch that `MixtureSampler` draws by default."""
        return self._epoch_size

    @property
    def keys(self) -> tuple[str, ...]:
        """The keys of every sample and batch, as member 0 orders them (ragged keys last)."""
        return (*self._layout, *self._ragged)

    @property
    def buffers(self) -> str:
        """Where this process's batches are allocated: "ring" (a worker), "pinned" or "pool"."""
        return self._source().kind

    @property
    def epoch(self) -> int:
        return self._datasets[0].epoch

    def set_epoch(self, epoch: int) -> None:
        """Every member crops epoch `epoch`'s random windows from the next batch on, in every worker."""
        for dataset in self._datasets:
            dataset.set_epoch(epoch)

    def __len__(self) -> int:
        return int(self._offsets[-1])

    def locate(self, indices: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(member, record in that member) of each index, negatives counted from the end."""
        if isinstance(indices, _torch.Tensor):
            indices = indices.numpy()
        try:
            ordinals = normalize(indices, len(self))
        except TypeError as error:
            if isinstance(indices, Sequence) and indices and isinstance(indices[0], Sequence | np.ndarray):
                raise TypeError(
                    "got a batch of batches; MixtureSampler yields whole batches, so pass it to the "
                    "DataLoader as batch_sampler=, not sampler="
                ) from None
            raise error
        members = np.searchsorted(self._offsets, ordinals, side="right") - 1
        return members, ordinals - self._offsets[members]

    def will_need(self, indices: Sequence[int] | np.ndarray) -> int:
        """Announce records a later batch reads to the members holding them; returns the bytes.

        See `SDSTorchDataset.will_need`; `MixtureSampler` calls this ahead of its batches.
        """
        members, records = self.locate(indices)
        announced = 0
        for member in np.unique(members).tolist():
            announced += self._datasets[member].will_need(records[members == member])
        return announced

    def __getitem__(self, index: int) -> dict[str, _torch.Tensor]:
        item: dict[str, _torch.Tensor] = self.__getitems__([index])[0]
        return item

    def __getitems__(self, indices: Sequence[int]) -> Batch:
        """Read the batch: one native call per member present, into the batch's final tensors."""
        members, records = self.locate(indices)
        count = int(members.size)
        layout = self._layout

        parts: list[tuple[np.ndarray, dict[str, object]]] = []

        def read(allocate: Allocator) -> dict[str, np.ndarray]:
            arrays = {key: allocate((count, *shape), dtype) for key, (shape, dtype) in layout.items()}
            for member in _in_order_of_appearance(members):
                rows = np.flatnonzero(members == member)
                parts.append((rows, self._read_member(member, records[rows], rows, arrays)))
            return arrays

        tensors, ring_block = read_tensors(read, self._source())
        # A worker's ring (the only source that carries anything) carries its block.
        block = cast("_Block | None", ring_block)
        if not self._ragged:
            return Batch(tensors, count, ring_block=block)
        kinds = {key: kind for key, (kind, _, _) in self._ragged.items()}
        ragged: dict[str, object] = {}
        for key, value in merge_ragged(parts, count, kinds).items():
            ragged[key] = _torch.from_numpy(value) if isinstance(value, np.ndarray) else value
        offsets_of = {key: kind.offsets for key, kind in kinds.items() if kind.offsets is not None}
        return Batch(tensors, count, ring_block=block, ragged=ragged, offsets_of=offsets_of)

    #: Grain's batched-read hook for random-access sources is spelled ``_getitems``.
    _getitems = __getitems__

    def _read_member(
        self, member: int, records: np.ndarray, rows: np.ndarray, arrays: dict[str, np.ndarray]
    ) -> dict[str, object]:
        """Read member `member`'s `records` into `rows` of `arrays`, in one native call;
        return its ragged keys (annotation items, offsets, ids) in its own row order."""
        dataset = self._datasets[member]
        first, last = int(rows[0]), int(rows[-1])
        together = last - first + 1 == rows.size
        try:
            if together:
                # Rows first..last of a C-contiguous array are themselves C-contiguous.
                return read_rows_into(
                    dataset, records, {key: array[first : last + 1] for key, array in arrays.items()}
                )
            scratch = {
                key: np.empty((rows.size, *array.shape[1:]), array.dtype) for key, array in arrays.items()
            }
            ragged = read_rows_into(dataset, records, scratch)
        except ValueError as error:
            if str(error).startswith("out["):  # this batch's layout is not the one agreed on
                raise ValueError(
                    f"mixture member {member} ({dataset.uri}): {error}. Every member of a Mixture "
                    "must deliver the layout it had when the Mixture was made; records of other "
                    "shapes batch together under a sds_loader.Window of one length"
                ) from error
            error.add_note(f"while reading mixture member {member} ({dataset.uri})")
            raise
        for key, array in arrays.items():
            array[rows] = scratch[key]
        return ragged

    def __repr__(self) -> str:
        members = ", ".join(
            f"{dataset.uri!r}: {weight:.3g}"
            for dataset, weight in zip(self._datasets, self._weights, strict=True)
        )
        return (
            f"Mixture({{{members}}}, records={len(self)}, epoch_size={self._epoch_size}, seed={self._seed})"
        )


def _in_order_of_appearance(members: np.ndarray) -> list[int]:
    unique, first = np.unique(members, return_index=True)
    return [int(member) for member in unique[np.argsort(first)]]


def _normalised_weights(weights: Sequence[float], count: int) -> tuple[float, ...]:
    if isinstance(weights, str | bytes | Mapping) or not isinstance(weights, Sequence | np.ndarray):
        raise TypeError(
            f"weights must be a sequence of numbers, one per dataset, not {type(weights).__name__}"
        )
    values = list(weights)
    if len(values) != count:
        raise ValueError(
            f"weights has {len(values)} entries for {count} datasets; give one weight per dataset"
        )
    checked = []
    for position, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
            raise TypeError(f"weight {position} is {value!r}; weights must be numbers")
        number = float(value)
        if not math.isfinite(number) or number < 0:
            raise ValueError(f"weight {position} is {value!r}; weights must be finite and zero or more")
        checked.append(number)
    total = math.fsum(checked)
    if total <= 0:
        raise ValueError("the weights sum to 0; give at least one dataset a positive weight")
    return tuple(value / total for value in checked)
