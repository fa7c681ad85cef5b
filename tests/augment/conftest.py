"""The augmentation tests' datasets (tests/support/augment_factory.py), written once a session."""

from __future__ import annotations

import numpy as np
import pytest
from augment_factory import bare_capture, complex_capture, pair_capture, varied_capture, varied_length, write


@pytest.fixture(scope="session")
def captures(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write(str(tmp_path_factory.mktemp("augment") / "c64.sds"), complex_capture, bursts=True)


@pytest.fixture(scope="session")
def pairs32(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write(str(tmp_path_factory.mktemp("augment") / "f32.sds"), pair_capture(np.float32))


@pytest.fixture(scope="session")
def pairs64(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write(str(tmp_path_factory.mktemp("augment") / "f64.sds"), pair_capture(np.float64))


@pytest.fixture(scope="session")
def bare(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write(str(tmp_path_factory.mktemp("augment") / "bare.sds"), bare_capture)


@pytest.fixture(scope="session")
def varied(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write(
        str(tmp_path_factory.mktemp("augment") / "varied.sds"),
        varied_capture,
        lengths=varied_length,
        bursts=True,
    )
