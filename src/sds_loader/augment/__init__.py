"""Augmentation that keeps labels true: RF transforms run natively inside the read.

A `Chain` of transforms, given to a reader (``BatchReader(uri,
augment=chain)``, `SDSTorchDataset`, `Mixture` members,
``sds_loader.ray.read_sds``), runs on every row right after it is decoded,
in the read's own threads. Each draw is keyed by (seed, epoch, ordinal,
place in the chain), so a record's augmentation is reproducible anywhere;
each batch says what was drawn (``augment.<position>.<kind>.<parameter>``);
annotation items declared as time positions or frequency edges follow every
transform (`sds_loader.augment.labels`). docs/augmentation.md says more.
"""

from sds_loader.augment.chain import Chain, SampleRate
from sds_loader.augment.transforms import (
    FrequencyShift,
    Gain,
    IQImbalance,
    Noise,
    Phase,
    Resample,
    SpectralInversion,
    TimeReversal,
    TimeShift,
    Transform,
)

__all__ = [
    "Chain",
    "FrequencyShift",
    "Gain",
    "IQImbalance",
    "Noise",
    "Phase",
    "Resample",
    "SampleRate",
    "SpectralInversion",
    "TimeReversal",
    "TimeShift",
    "Transform",
]
