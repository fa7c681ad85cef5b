"""Types of the compiled extension, as csrc/python/ defines it.

tests/packaging/test_native_stub.py compares this file with the built module: every
public function, class, method and property, and each one's parameter names
and defaults. Names that begin with an underscore here are for typing only.
"""

from collections.abc import Sequence
from typing import Any, Protocol, TypedDict, type_check_only

import numpy as np
import numpy.typing as npt
from typing_extensions import Buffer

@type_check_only
class _RangeSource(Protocol):
    """A shard source written in Python (see sds_loader.s3_source.S3RangeSource)."""

    def size(self, file: int, /) -> int: ...
    def name(self, file: int, /) -> object: ...
    def fetch(self, requests: list[tuple[int, int, memoryview]], /) -> object: ...

# A writable, C-contiguous buffer (numpy's stubs call an array a Buffer only
# from Python 3.12 on).
_Writable = Buffer | npt.NDArray[Any]
# (output name, tensor key, SafeTensors dtype, shape) of each field of a record.
_ProbedField = tuple[str, str, str, tuple[int, ...]]
# (shard path, compression, decoded size, chunk start, next chunk's start) of a chunk.
_ChunkExtent = tuple[str, str, int, int, int]

@type_check_only
class _ShardSummary(TypedDict):
    file_size: int
    num_records: int
    num_chunks: int
    chunk_types: dict[str, int]
    compression: str
    max_records_per_chunk: int
    encoded_bytes: int
    decoded_bytes: int
    writer_options: str

@type_check_only
class _ShardProblem(TypedDict):
    chunk: int
    record: int
    offset: int
    message: str

class ObjectStoreSource:
    """Shard byte ranges from S3 or Google Cloud Storage, fetched natively with ranged GETs."""

    def __init__(
        self,
        uris: Sequence[str],
        urls: Sequence[str],
        max_attempts: int,
        backoff_seconds: float,
        backoff_max_seconds: float,
        connect_timeout: float,
        read_timeout: float,
        requests_in_flight: int,
        tail_bytes: int,
        head_bytes: int,
        readahead_bytes: int,
        part_bytes: int,
        store: str = "s3",
        cache_dir: str = "",
        cache_limit: int = 0,
        cache_floor: int = 1073741824,
        check_openings: bool = False,
    ) -> None: ...
    def set_credentials(self, region: str, access_key: str, secret_key: str, session_token: str) -> None: ...
    def set_bearer_token(self, token: str) -> None: ...
    def size(self, file: int) -> int: ...
    def name(self, file: int) -> str: ...
    def fetch(self, requests: list[tuple[int, int, _Writable]]) -> None: ...
    def will_need(self, ranges: Sequence[tuple[int, int, int]]) -> None: ...
    def set_readahead_into_cache(self, into_cache: bool) -> None: ...
    def open_shards(self, files: Sequence[int]) -> None: ...
    def wait_readahead(self, seconds: float) -> bool: ...
    def wait_writes(self, seconds: float) -> bool: ...
    def close(self) -> None: ...
    @property
    def counters(self) -> tuple[int, int, int, int, int]: ...
    @property
    def cache_counters(self) -> tuple[int, int, int, int, int, int] | None: ...
    @property
    def cache_warning(self) -> str: ...
    @property
    def cache_limit(self) -> int: ...
    def cache_usage(self) -> int: ...

class BatchLayout:
    """What one batch looks like, described once per schema: its fields and targets."""

    def __init__(self) -> None: ...
    def add_field(
        self,
        name: str,
        tensor: str,
        dtype: str,
        shape: Sequence[int],
        window_axis: int | None = None,
        lengths: str | None = None,
    ) -> None:
        """Buffer `name` gets tensor `tensor` (a hint) of `dtype` and row `shape`; with `window_axis`,
        a window along it, and buffer `lengths` (when given one) the positions each row holds."""
    def add_target(self, key: str, kind: str) -> None:
        """Buffer `key` gets the metadata scalar `key`, as int64 ("i") or float64 ("f")."""
    @property
    def fields(self) -> int: ...
    @property
    def targets(self) -> int: ...

class ShardSet:
    """The shards of one dataset, read natively."""

    def __init__(
        self,
        paths: Sequence[str],
        verify_checksums: bool | str,
        max_open_files: int,
        source: _RangeSource | ObjectStoreSource | None = None,
        sizes: npt.NDArray[np.int64] | None = None,
        root: str = "",
        prefix: str = "",
        digests: npt.NDArray[np.uint8] | None = None,
    ) -> None: ...
    @property
    def held_bytes(self) -> int: ...
    def read(
        self,
        files: npt.ArrayLike,
        shard_records: npt.ArrayLike,
        ordinals: npt.ArrayLike,
        layout: BatchLayout,
        buffers: dict[str, _Writable],
        threads: int,
        starts: npt.ArrayLike | None = None,
        pad: bool = False,
    ) -> npt.NDArray[np.uint8]:
        """Decodes the records into `layout`'s buffers, by name (a windowed field's shaped
        (rows, *shape)); returns 1 for each row the caller must read instead."""
    def read_ordinals(
        self,
        ordinals: npt.ArrayLike,
        layout: BatchLayout,
        buffers: dict[str, _Writable],
        threads: int,
        starts: npt.ArrayLike | None = None,
        pad: bool = False,
        finish: RowFinisher | None = None,
    ) -> npt.NDArray[np.uint8]:
        """read, each ordinal located in the shard table keep_runs kept; `finish` (an
        AugmentRows) runs on each row the core decodes, as it decodes it."""
    def keep_runs(
        self, starts: npt.NDArray[np.int64], skips: npt.NDArray[np.int64], files: npt.NDArray[np.int64]
    ) -> None:
        """Keeps a shard table's columns, borrowed (kept alive with the set), for read_ordinals."""
    def probe(self, file: int, shard_record: int, ordinal: int) -> tuple[list[_ProbedField], str] | None:
        """One record's fields and its metadata as JSON, or None where the core cannot read it."""
    @property
    def num_files(self) -> int: ...
    @property
    def worker_threads(self) -> int: ...
    @property
    def kept_scratch_bytes(self) -> int: ...
    @property
    def shards_indexed(self) -> int: ...
    @property
    def index_bytes(self) -> int: ...
    @property
    def footer_reads(self) -> int: ...
    @property
    def max_chunk_bytes(self) -> int: ...
    @max_chunk_bytes.setter
    def max_chunk_bytes(self, value: int, /) -> None: ...
    @property
    def work_per_helper(self) -> int: ...
    @work_per_helper.setter
    def work_per_helper(self, value: int, /) -> None: ...
    @property
    def helped_batches(self) -> int: ...
    @property
    def stage_sampling(self) -> int: ...
    @stage_sampling.setter
    def stage_sampling(self, value: int, /) -> None: ...
    def add_stage_seconds(self, out: npt.NDArray[np.float64], python_wall: float) -> None:
        """Adds the stage seconds since the last call into `out`, one per name of STAGES."""
    def wait_announcements(self, seconds: float) -> bool: ...

#: The stages a read's time is accounted to: the core's, then "python".
STAGES: tuple[str, ...]

def record_bytes(
    shard_set: ShardSet, verify: bool | str, files: npt.ArrayLike, records: npt.ArrayLike
) -> list[bytes | None]: ...
def checked_ordinals(indices: npt.NDArray[np.int64], length: int) -> npt.NDArray[np.int64]: ...
def checked_int_sequence(indices: object, length: int) -> npt.NDArray[np.int64] | None: ...
def locate_ordinals(
    starts: npt.ArrayLike, skips: npt.ArrayLike, files: npt.ArrayLike, ordinals: npt.ArrayLike
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]: ...
def hint_records(shard_set: ShardSet, files: npt.ArrayLike, records: npt.ArrayLike) -> int: ...
def announce_records(shard_set: ShardSet, files: npt.ArrayLike, records: npt.ArrayLike) -> bool: ...
def mapped_reads_guarded() -> bool: ...
def chunk_ranges(
    shard_set: ShardSet, files: npt.ArrayLike, records: npt.ArrayLike
) -> list[tuple[int, int, int]]: ...
def annotation_rows(
    rows: ShardSet,
    metadata: ShardSet,
    verify: bool | str,
    row_files: npt.ArrayLike,
    row_records: npt.ArrayLike,
    meta_files: npt.ArrayLike,
    meta_records: npt.ArrayLike,
    ordinals: npt.ArrayLike,
    fields: Sequence[str],
) -> tuple[
    npt.NDArray[np.uint8],
    list[str],
    list[tuple[str, tuple[int, ...], npt.NDArray[np.uint8], npt.NDArray[np.int64]]],
]: ...
def shard_summary(path: str) -> _ShardSummary: ...
def verify_shard(path: str) -> list[_ShardProblem]: ...
def chunk_payloads(path: str, records: Sequence[int]) -> list[tuple[str, bytes, int]]: ...
def bound_decompress(
    payloads: list[tuple[str, bytes, int]], repeats: int = 1, batch_rows: int = 1
) -> float: ...
def chunk_extents(path: str, records: Sequence[int]) -> list[_ChunkExtent]: ...
def bound_read(
    chunks: list[_ChunkExtent],
    repeats: int = 1,
    hash: bool = True,
    batch_rows: int = 256,
) -> float: ...
def chunk_hash(
    data: bytes, cuts: Sequence[int], copied: Sequence[bool], portable: bool = False
) -> tuple[int, bytes]: ...
def node_cache_faults(no_rename_noreplace: bool = False, posix_locks: bool = False) -> None: ...
def bound_memcpy(buffers: Sequence[bytes], repeats: int = 1) -> float: ...

#: Augmentation transform kinds by name ("phase": 1, ... "resample": 9).
AUGMENT_KINDS: dict[str, int]

def augment_draw(
    seed: int, epoch: int, ordinals: npt.ArrayLike, position: int, count: int
) -> npt.NDArray[np.float64]: ...
def augment_spans(
    kinds: npt.ArrayLike,
    params: npt.ArrayLike,
    out_start: npt.ArrayLike,
    out_length: int,
    record_length: npt.ArrayLike,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]: ...
def augment_apply(
    kinds: npt.ArrayLike,
    params: npt.NDArray[np.float64],
    seed: int,
    epoch: int,
    ordinals: npt.ArrayLike,
    source: npt.NDArray[Any],
    src_start: npt.ArrayLike,
    record_length: npt.ArrayLike,
    out: npt.NDArray[Any],
    out_start: npt.ArrayLike,
    threads: int,
    first_channel: int = 0,
) -> None: ...

class RowFinisher:
    """Work a read does on each row right after decoding it."""

class AugmentRows(RowFinisher):
    """A batch's chain over its fields, for a read to run on each row as it decodes it
    (read_ordinals(finish=)), then finish_rest() on the rows the read left."""

    def __init__(
        self,
        kinds: npt.ArrayLike,
        seed: int,
        epoch: int,
        ordinals: npt.ArrayLike,
        src_start: npt.ArrayLike,
        record_length: npt.ArrayLike,
        out_start: npt.ArrayLike,
        fields: Sequence[tuple[npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[np.float64], int]],
        held: npt.NDArray[np.int64] | None = None,
    ) -> None:
        """fields: (source, out, params, first_channel) each; the first's params are the draws,
        the others' copies of them. source may be out itself where every row's source is its
        window (src_start == out_start). held: a padded window's int64 positions each row's
        record holds, as the read writes them before the row is run: the row's record then
        ends there (a chain that keeps samples in place only)."""
    def finish_rest(self, threads: int) -> None:
        """Runs the rows no read has run."""
    @property
    def finished_rows(self) -> int:
        """Rows run so far."""
