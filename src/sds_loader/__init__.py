"""sds-loader: batches of signal_dataset records, read natively into model buffers."""

from sds_loader.errors import CorruptShardError, MixedShapesError, TargetError
from sds_loader.reader import BatchReader, ReadStats

__all__ = ["BatchReader", "CorruptShardError", "MixedShapesError", "ReadStats", "TargetError"]
__version__ = "0.1.0"
