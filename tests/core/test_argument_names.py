"""Errors at the edges of the API name the argument that caused them.

An allocator that returns something without the buffer protocol, or a window
whose rows could never be allocated, raises an error that says which argument
to change, not numpy's or Python's own words about an attribute or an array.
"""

from __future__ import annotations

import numpy as np
import pytest
from sds_factory import write_dataset

from sds_loader import BatchReader, Window


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("names") / "ds"
    write_dataset(path, 4)
    return str(path)


def test_an_allocator_that_returns_no_buffer_is_named(root: str) -> None:
    reader = BatchReader(root, fields=("samples",))
    with pytest.raises(TypeError, match=r"allocator= returned for 'samples' is a list"):
        reader.read([0, 1], allocator=lambda shape, dtype: [0] * 8)


def test_an_allocator_of_the_wrong_shape_is_named(root: str) -> None:
    reader = BatchReader(root, fields=("samples",))
    with pytest.raises(ValueError, match=r"allocator= returned for 'samples' has shape \(3,\)"):
        reader.read([0, 1], allocator=lambda shape, dtype: np.empty(3, dtype=dtype))


def test_an_allocator_that_works_fills_its_buffers(root: str) -> None:
    made: list[np.ndarray] = []

    def allocate(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        made.append(np.full(shape, 0, dtype=dtype))
        return made[-1]

    batch = BatchReader(root, fields=("samples",)).read([3, 0], allocator=allocate)
    assert np.shares_memory(batch["samples"], made[0])
    expected = BatchReader(root, fields=("samples",)).read([3, 0])["samples"]
    assert batch["samples"].tobytes() == expected.tobytes()


@pytest.mark.parametrize("pad", [False, True])
def test_a_window_too_long_to_allocate_is_named(root: str, pad: bool) -> None:
    reader = BatchReader(root, fields=("samples",), window=Window("a1", 2**62, pad=pad))
    with pytest.raises(ValueError, match=r"window=Window\(axis='a1', length=4611686018427387904"):
        reader.read([0])
