"""A chain of transforms, the fields it augments, and where its physical units come from.

A `Chain` is what a reader is given (``BatchReader(uri, augment=chain)``):
an ordered list of transforms, checked when made, plus what the reader must
know to apply them in physical units and keep labels true: the sample rate
(`SampleRate`), the capture's centre frequency where labels are absolute or a
shift is a retune, and which record metadata a batch should get back changed.
It is a plain value: it pickles, compares and hashes.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

from sds_loader.augment.transforms import Transform

#: The metadata a chain changes that a batch can get back (`Chain(report=...)`).
REPORTS = ("sample_rate", "center_frequency", "snr_db")

#: Seconds per unit of a time axis's Coordinate step.
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "\u00b5s": 1e-6, "ns": 1e-9}


@dataclass(frozen=True)
class SampleRate:
    """Where each record's number (a sample rate, a centre frequency) comes from.

    - ``SampleRate.axis("time")``: the time axis's `signal_dataset.Coordinate`,
      whose ``step`` is the sample period in its ``unit`` (s, ms, us or ns);
    - ``SampleRate.key("sample_rate")``: a record metadata key holding it in Hz;
    - ``SampleRate.fixed(1e6)`` (or just the number): the same for every record.
    """

    source: str
    name: str | None = None
    value: float | None = None

    @classmethod
    def axis(cls, name: str = "time") -> SampleRate:
        if not isinstance(name, str) or not name:
            raise TypeError(f"SampleRate.axis takes an axis name, not {name!r}")
        return cls("axis", name=name)

    @classmethod
    def key(cls, name: str) -> SampleRate:
        if not isinstance(name, str) or not name:
            raise TypeError(f"SampleRate.key takes a record metadata key, not {name!r}")
        return cls("key", name=name)

    @classmethod
    def fixed(cls, value: float) -> SampleRate:
        if (
            isinstance(value, bool)
            or not isinstance(value, numbers.Real)
            or not math.isfinite(value)
            or value <= 0
        ):
            raise ValueError(f"a fixed sample rate must be a positive finite number of Hz, not {value!r}")
        return cls("fixed", value=float(value))

    def describe(self) -> str:
        if self.source == "axis":
            return f"the Coordinate step of axis {self.name!r}"
        if self.source == "key":
            return f"metadata key {self.name!r}"
        return f"{self.value:g}"


def sample_rate_setting(value: object, argument: str = "sample_rate") -> SampleRate | None:
    """`value` as a `SampleRate`: None, a SampleRate, or a number of Hz."""
    if value is None or isinstance(value, SampleRate):
        return value
    if isinstance(value, str):
        raise TypeError(
            f"Chain {argument}={value!r}: pass augment.SampleRate.key({value!r}) for a metadata key, "
            f"or augment.SampleRate.axis({value!r}) for an axis's Coordinate"
        )
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return SampleRate.fixed(float(value))
    raise TypeError(f"Chain {argument} must be an augment.SampleRate, a number of Hz or None, not {value!r}")


def _center_setting(value: object) -> SampleRate | None:
    """A centre frequency: a metadata key (str), a number of Hz (zero allowed), or a SampleRate."""
    if value is None or isinstance(value, SampleRate):
        return value
    if isinstance(value, str) and value:
        return SampleRate.key(value)
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value):
        return SampleRate("fixed", value=float(value))
    raise TypeError(
        f"Chain center_frequency must be a metadata key, a finite number of Hz or None, not {value!r}"
    )


@dataclass(frozen=True)
class Chain:
    """Transforms applied in order to every row of the fields named, natively, as each is read.

    - `fields`: the complex fields to augment (complex64, or real IQ pairs
      with a trailing axis of 2); None: every complex64 field the reader
      reads, or, where it reads none, every pair field.
    - `seed`: keys every draw with the epoch, the record's ordinal and the
      transform's place; None: the seed of the `SDSTorchDataset` reading it
      (0 for a `BatchReader`).
    - `sample_rate`: a `SampleRate`, a number of Hz, or None to take it from
      the time axis's Coordinate where the records have one. Transforms in
      physical units and frequency labels need it; a reader refuses them
      when made if it cannot be found.
    - `center_frequency`: a metadata key or a number of Hz, for absolute
      frequency labels and for `report=("center_frequency",)`.
    - `keep_fraction`: a label item clipped by the band edge or the window is
      dropped when it keeps less than this fraction of its extent.
    - `report`: changed metadata to return per row (``augment.sample_rate``,
      ``augment.center_frequency``, ``augment.snr_db``).
    """

    transforms: tuple[Transform, ...]
    fields: tuple[str, ...] | None = None
    seed: int | None = None
    sample_rate: SampleRate | None = None
    center_frequency: SampleRate | None = None
    keep_fraction: float = 0.5
    report: tuple[str, ...] = ()

    def __init__(
        self,
        transforms: Sequence[Transform],
        *,
        fields: Sequence[str] | None = None,
        seed: int | None = None,
        sample_rate: SampleRate | float | None = None,
        center_frequency: SampleRate | str | float | None = None,
        keep_fraction: float = 0.5,
        report: Sequence[str] = (),
    ) -> None:
        if isinstance(transforms, Transform):
            transforms = (transforms,)
        if isinstance(transforms, str | bytes) or not isinstance(transforms, Sequence):
            raise TypeError(f"Chain takes a list of transforms, not {type(transforms).__name__}")
        steps = tuple(transforms)
        for step in steps:
            if not isinstance(step, Transform):
                raise TypeError(
                    f"Chain takes sds_loader.augment transforms (Phase(), Noise(...), ...), not {step!r}"
                )
        if fields is not None:
            if isinstance(fields, str):
                fields = (fields,)
            fields = tuple(fields)
            if not fields or any(not isinstance(name, str) or not name for name in fields):
                raise TypeError(f"Chain fields must be one or more field names or None, not {fields!r}")
            if len(set(fields)) != len(fields):
                raise ValueError(f"Chain fields names a field more than once: {list(fields)}")
        if seed is not None and (
            isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64
        ):
            raise ValueError(f"Chain seed must be an integer from 0 to 2**64 - 1, or None, not {seed!r}")
        if (
            isinstance(keep_fraction, bool)
            or not isinstance(keep_fraction, numbers.Real)
            or not 0.0 <= float(keep_fraction) <= 1.0
        ):
            raise ValueError(f"Chain keep_fraction must be a number from 0 to 1, not {keep_fraction!r}")
        reports = (report,) if isinstance(report, str) else tuple(report)
        for name in reports:
            if name not in REPORTS:
                raise ValueError(f"Chain report= takes {list(REPORTS)}, not {name!r}")
        object.__setattr__(self, "transforms", steps)
        object.__setattr__(self, "fields", fields)
        object.__setattr__(self, "seed", seed)
        object.__setattr__(self, "sample_rate", sample_rate_setting(sample_rate))
        object.__setattr__(self, "center_frequency", _center_setting(center_frequency))
        object.__setattr__(self, "keep_fraction", float(keep_fraction))
        object.__setattr__(self, "report", tuple(dict.fromkeys(reports)))

    def __len__(self) -> int:
        return len(self.transforms)

    @property
    def moves_samples(self) -> bool:
        """Whether a row's output samples come from other positions of the record (time shift,
        reversal, resampling): then the span read differs from the window, and labels move."""
        return any(step.kind in ("time_shift", "reverse", "resample") for step in self.transforms)

    @property
    def resamples(self) -> bool:
        return any(step.kind == "resample" for step in self.transforms)

    def physical(self) -> list[str]:
        """The transforms given in physical units, which need the sample rate."""
        return [name for step in self.transforms if (name := step.physical()) is not None]


def chain_setting(value: object) -> Chain | None:
    """`augment=` as a reader takes it: a Chain, a list of transforms (a Chain of defaults), or None."""
    if value is None or isinstance(value, Chain):
        return value
    if isinstance(value, Transform):
        return Chain([value])
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return Chain(value)
    raise TypeError(
        f"augment= takes a sds_loader.augment.Chain or a list of transforms, not {type(value).__name__}"
    )
