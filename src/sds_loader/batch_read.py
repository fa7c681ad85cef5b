"""One batch read through a reader's state in this process, and counted.

A batch is read under the layout `schema.Layouts` confirms for it. The
native core reads the batch into its arrays; the records it cannot read
(transposed chunks, say) are then read by signal_dataset's reader in its
helper process, into the same rows; a dataset the core cannot read at all
is read by that helper whole. `ReadStats` counts each path's records, the
batch, and the read's stage times, once it succeeds. Announcements of the
batches to come (`announce`) go to the same state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from sds_loader import read_stats
from sds_loader.read_stats import ReadStats
from sds_loader.schema import Allocator, Layouts, Schema, batch_buffers, cached_native_layout

if TYPE_CHECKING:
    from sds_loader.process_state import ProcessState
    from sds_loader.windows import Window


def read_batch(
    state: ProcessState,
    layouts: Layouts,
    ordinals: np.ndarray,
    starts: np.ndarray | None,
    *,
    out: Mapping[str, object] | None,
    allocator: Allocator | None,
    window: Window | None,
    window_length: int | None,
    threads: int,
    stats: ReadStats,
    started: float,
    apart: dict[str, np.ndarray] | None = None,
    finish: Callable[[Schema, dict[str, np.ndarray]], Any] | None = None,
) -> dict[str, np.ndarray]:
    """Read `ordinals` under the layout `layouts` confirms for them into `out`, else fresh arrays.

    Before the first batch its shards are opened and its chunks asked for
    together (`announce_first_batch`), so that probing its first record
    waits among them. Python's stage is timed from `started`. The fields
    `apart` names are decoded into fresh arrays put there instead, their
    returned buffers left for the caller to fill (an augmentation's output).
    `finish` makes, from a read's layout and arrays, work for the core to do on each row
    as it decodes it (an augmentation's `AugmentRows`), whose `finish_rest`
    then runs on the rows the core left to signal_dataset.
    """
    pad = window is not None and window.pad
    if layouts.last is None:
        if len(state.dataset) == 0:
            raise ValueError(
                f"dataset {layouts.uri} holds no records, so a batch of it has no fields to return"
            )
        announce_first_batch(state, ordinals, stats)

    def fetched() -> None:
        read_stats.count_fetches(stats, state)

    def read_as(layout: Schema, since: float) -> dict[str, np.ndarray]:
        arrays = batch_buffers(
            layout, ordinals.size, out=out, allocator=allocator, window=window, window_length=window_length
        )
        decoded = arrays
        if apart is not None:
            decoded = dict(arrays)
            for name in apart:
                decoded[name] = apart[name] = np.empty_like(arrays[name])
        finisher = finish(layout, arrays) if finish is not None and ordinals.size else None
        if ordinals.size:
            read_into(
                state,
                ordinals,
                layout,
                decoded,
                starts,
                pad=pad,
                threads=threads,
                stats=stats,
                batches=1,
                started=since,
                finish=finisher,
            )
        if finisher is not None:
            finisher.finish_rest(threads)
        return arrays

    if ordinals.size == 0:
        return read_as(layouts.known(state, 0, fetched), started)
    return layouts.read(
        state,
        ordinals,
        started,
        read_as,
        fetched=fetched,
        retried=lambda: read_stats.count_schema_retry(stats),
    )


def read_into(
    state: ProcessState,
    ordinals: np.ndarray,
    schema: Schema,
    arrays: dict[str, np.ndarray],
    starts: np.ndarray | None,
    *,
    pad: bool,
    threads: int,
    stats: ReadStats,
    batches: int,
    started: float,
    finish: Any = None,
) -> None:
    """Fill `arrays` with `ordinals` under `schema`; `stats` count the records and `batches`
    more batches once it succeeds, and the read's stage times (Python's since `started`).
    The core runs `finish` (a `_native.RowFinisher`) on each row it decodes."""
    if state.native is None:
        state.fallback.fill(ordinals, np.arange(ordinals.size), schema, arrays, starts, pad)
        read_stats.count_fallback_batch(
            stats, int(ordinals.size), batches, started if state.stage_sampling else None
        )
        return
    assert state.table is not None
    layout = cached_native_layout(state, schema)
    if state.source is not None:
        open_shards(state, state.table.locate(ordinals)[0], stats)
    helped = state.native.helped_batches
    try:
        # The core locates each ordinal in the table it keeps (ShardTable.native):
        # a round trip less, which a batch of a few short records notices.
        needs_fallback = state.native.read_ordinals(ordinals, layout, arrays, threads, starts, pad, finish)
    except BaseException:
        read_stats.count_fetches(stats, state)
        read_stats.count_failed_native(stats, state.native, state.native.helped_batches - helped, started)
        raise
    read_stats.count_fetches(stats, state)
    # Another thread's read may land in between: a count for tests that
    # read from one thread.
    helped = state.native.helped_batches - helped
    # The array's own nonzero(): flatnonzero and any() each pass through
    # Python wrappers that cost more than a small batch's bookkeeping.
    positions = needs_fallback.nonzero()[0]
    if positions.size:
        try:
            state.fallback.fill(
                ordinals[positions],
                positions,
                schema,
                arrays,
                None if starts is None else starts[positions],
                pad,
            )
        except BaseException:
            read_stats.count_helped(stats, helped)
            raise
    read_stats.count_native_batch(
        stats,
        state.native,
        records=int(ordinals.size),
        fallback_records=int(positions.size),
        helped=helped,
        batches=batches,
        started=started,
    )


def open_shards(state: ProcessState, files: np.ndarray, stats: ReadStats) -> None:
    """Open the new shards among `files` together: in object storage one round
    trip for all of them, rather than one each as the core plans the batch."""
    if state.source is None:
        return
    try:
        state.source.open_shards(np.unique(files).tolist())
    finally:
        read_stats.count_fetches(stats, state)


def announce_first_batch(state: ProcessState, ordinals: np.ndarray, stats: ReadStats) -> None:
    """Before the first batch's probe: open its shards together, and in object storage ask
    for its chunks at once, so that the probe waits among them, not in a round trip of its own."""
    # Local shards are opened as the core plans the batch, and need no hint.
    if ordinals.size and state.table is not None and state.source is not None:
        files, records = state.table.locate(ordinals)
        open_shards(state, files, stats)
        if state.native is not None:
            from sds_loader import _native

            _native.hint_records(state.native, files, records)


def announce(state: ProcessState, ordinals: np.ndarray, *, into_cache: bool) -> int:
    """Tell the storage that `ordinals` will be read soon (see `BatchReader.will_need`)."""
    if state.native is None or ordinals.size == 0:
        return 0
    from sds_loader import _native

    assert state.table is not None
    files, records = state.table.locate(ordinals)
    if state.source is not None:
        state.source.readahead_into_cache(into_cache)
        state.readahead().announce(files, records)
        return 0
    return int(_native.hint_records(state.native, files, records))
