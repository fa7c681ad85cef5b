"""sds-loader: batches of signal_dataset records, read natively into model buffers."""

from sds_loader._version import __version__ as __version__
from sds_loader.annotations import Annotations
from sds_loader.boundaries import Boundaries
from sds_loader.dataset import DatasetNotFoundError
from sds_loader.errors import (
    CorruptShardError,
    MixedShapesError,
    TargetError,
    UnknownNameError,
    UnsafePathError,
)
from sds_loader.input_report import InputReport
from sds_loader.input_watch import InputWatch
from sds_loader.read_stats import ReadStats
from sds_loader.reader import BatchReader
from sds_loader.windows import Window

__all__ = [
    "Annotations",
    "BatchReader",
    "Boundaries",
    "CorruptShardError",
    "DatasetNotFoundError",
    "InputReport",
    "InputWatch",
    "MixedShapesError",
    "ReadStats",
    "TargetError",
    "UnknownNameError",
    "UnsafePathError",
    "Window",
]
