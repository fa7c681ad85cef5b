"""A reader's chain at work: checked against the dataset when the reader is made, then run on
every row of a batch as the native read decodes it, with the labels moved alike.

Three paths, by what the chain does to sample positions:

- no window: each row is decoded into the batch's own buffers and the chain
  runs on it there, in place, on the thread that decoded it and right after,
  while the row is in that core's cache (a row keeps its stored length: a
  resample's output is cut, or zero past ``ceil(N r)``);
- a window, and a chain that keeps every sample where it is (phase,
  frequency shift, gain, noise, inversion, IQ imbalance): the window is
  decoded and the chain runs on it alone, in place as above, with the
  window's absolute positions (a frequency shift's phase, a noise sample's
  key);
- a window, and a chain that moves samples (time shift, reversal,
  resample): the native core says which span of each stored record the
  window of the final record needs (`augment_spans`), that span is decoded
  (a longer window, zero past the record), and the chain runs from it into
  the window in the batch's buffers, each row as it is decoded. The
  window's start is a position of the final record: a ``"random"`` crop
  draws it over the final record's length.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sds_loader import batch_read
from sds_loader.annotations import Annotations
from sds_loader.augment.chain import Chain, SampleRate
from sds_loader.augment.draws import Drawn, draw, keys, reports
from sds_loader.augment.fields import AugmentedField, augmented_fields, complex_rows
from sds_loader.augment.labels import Placement, follow
from sds_loader.augment.record_numbers import MissingNumber, RecordNumbers
from sds_loader.schema import Allocator, Layouts, Schema, batch_buffers
from sds_loader.windows import Window, batch_window_length, length_key, normalize_starts, window_crop

if TYPE_CHECKING:
    from sds_loader.extras import BatchExtras
    from sds_loader.process_state import ProcessState
    from sds_loader.read_stats import ReadStats


@dataclass
class BatchRead:
    """What one read is given: the reader's parts and this batch's arguments."""

    state: ProcessState
    layouts: Layouts
    extras: BatchExtras
    ordinals: np.ndarray
    starts: object
    out: Mapping[str, object] | None
    allocator: Allocator | None
    window: Window | None
    epoch: int
    threads: int
    stats: ReadStats
    started: float


class Augmenter:
    """A reader's chain, with what it learnt of the dataset when the reader was made."""

    def __init__(self, chain: Chain, *, fields: tuple[str, ...] | None, window: Window | None) -> None:
        self.chain = chain
        self.seed = 0 if chain.seed is None else chain.seed
        self.window = window
        self.read_fields = fields
        self.numbers = RecordNumbers()
        #: Set by `check`: the fields augmented, their time axis, the sample rate's source.
        self.fields: tuple[AugmentedField, ...] = ()
        self.axis = ""
        self.sample_rate: SampleRate | None = None
        self.annotations: tuple[Annotations, ...] = ()
        #: The layouts of a window's span read (a chain that moves samples), made on first use.
        self._spans: Layouts | None = None
        self._key_names: tuple[str, ...] | None = None

    # -- when the reader is made -------------------------------------------

    def check(self, state: ProcessState, schema: Schema, annotations: tuple[Annotations, ...]) -> None:
        """Refuse, naming what is missing and how to give it, a chain this dataset cannot run."""
        chain = self.chain
        first = np.zeros(1, dtype=np.int64)
        layout = state.metadata.layouts(first)[0]
        self.fields = augmented_fields(schema.fields, layout, chain.fields)
        self.axis = self.fields[0].axis
        self.annotations = annotations
        by_name = {spec.name: spec for spec in schema.fields}
        if self.window is not None:
            for item in self.fields:
                spec = by_name[item.name]
                inner = len(spec.shape) - (2 if item.pairs else 1)
                if spec.window_axis != inner:
                    raise ValueError(
                        f"the window runs along {self.window.axis!r}, and the chain along field "
                        f"{item.name!r}'s "
                        f"time axis {item.axis!r} (its innermost complex axis); window the time axis"
                    )
        names = tuple(item.name for item in self.fields)
        needs = list(chain.physical())
        for annotation in annotations:
            if annotation.frequencies:
                needs.append(f"Annotations({annotation.name!r}, frequencies=...)")
            time_fields = [name for name, axis in annotation.positions.items() if axis == self.axis]
            if len(time_fields) > 1 and any(getattr(step, "circular", False) for step in chain.transforms):
                raise ValueError(
                    f"Annotations({annotation.name!r}) declares {time_fields} as time positions; a circular "
                    "time "
                    "shift splits an item in two, which only one positions field per set can follow: "
                    "read the others in a set of their own"
                )
        if "sample_rate" in chain.report:
            needs.append('Chain(report=("sample_rate",))')
        self.sample_rate = self._rate_source(state, names, needs)
        for step in chain.transforms:
            key = getattr(step, "stored_snr", None)
            if key is not None:
                self._check_number(
                    state, SampleRate.key(key), names, f"Noise(stored_snr={key!r})", "the stored SNR"
                )
        if self._needs_center(annotations):
            if chain.center_frequency is None:
                raise ValueError(
                    "absolute frequency labels and report=('center_frequency',) need each record's centre "
                    "frequency: pass Chain(center_frequency='<metadata key>') or a number of Hz"
                )
            self._check_number(
                state, chain.center_frequency, names, "Chain(center_frequency=...)", "the centre frequency"
            )

    def _needs_center(self, annotations: tuple[Annotations, ...]) -> bool:
        absolute = any(mode == "absolute" for spec in annotations for mode in spec.frequencies.values())
        return absolute or "center_frequency" in self.chain.report

    def _rate_source(
        self, state: ProcessState, names: tuple[str, ...], needs: list[str]
    ) -> SampleRate | None:
        given = self.chain.sample_rate
        if given is not None:
            if needs:
                self._check_number(state, given, names, needs[0], "the sample rate")
            return given
        automatic = SampleRate.axis(self.axis) if self.axis else None
        if automatic is not None:
            try:
                self.numbers.values(state, np.zeros(1, dtype=np.int64), automatic, names)
                return automatic
            except MissingNumber as missing:
                reason = str(missing)
        else:
            reason = f"fields {list(names)} have no named time axis"
        if needs:
            raise ValueError(
                f"{needs[0]} works in physical units and needs the sample rate, which dataset "
                f"{state.dataset.root} does not give ({reason}). Give it with "
                "Chain(sample_rate=augment.SampleRate.key('<metadata key holding it in Hz>')), "
                "Chain(sample_rate=<Hz>) for every record, or write the records with "
                "Axis('time', n, coordinate=Coordinate(step=1 / fs, unit='s')); or give the transform "
                "in samples (FrequencyShift(fraction=...), TimeShift(samples=...))"
            )
        return None

    def _check_number(
        self, state: ProcessState, source: SampleRate, names: tuple[str, ...], what: str, number: str
    ) -> None:
        try:
            self.numbers.values(state, np.zeros(1, dtype=np.int64), source, names)
        except MissingNumber as missing:
            fix = (
                "give another SampleRate, or a number of Hz"
                if number == "the sample rate"
                else "name a metadata key every record holds"
            )
            raise ValueError(
                f"{what} takes {number} from {source.describe()}, and {missing}; {fix}"
            ) from None

    # -- a batch -----------------------------------------------------------

    def _numbers(
        self, state: ProcessState, ordinals: np.ndarray
    ) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray | None]:
        names = tuple(item.name for item in self.fields)
        rows = ordinals.size
        rate = (
            self.numbers.values(state, ordinals, self.sample_rate, names)
            if self.sample_rate is not None
            else np.full(rows, np.nan)
        )
        stored: dict[str, np.ndarray] = {}
        for step in self.chain.transforms:
            key = getattr(step, "stored_snr", None)
            if key is not None and key not in stored:
                stored[key] = self.numbers.values(state, ordinals, SampleRate.key(key), names)
        center = None
        if self.chain.center_frequency is not None and self._needs_center(self.annotations):
            center = self.numbers.values(state, ordinals, self.chain.center_frequency, names)
        return rate, stored, center

    def _draw(
        self, state: ProcessState, ordinals: np.ndarray, lengths: np.ndarray, epoch: int
    ) -> tuple[Drawn, np.ndarray | None]:
        rate, stored, center = self._numbers(state, ordinals)
        drawn = draw(
            self.chain,
            seed=self.seed,
            epoch=epoch,
            ordinals=ordinals,
            record_lengths=lengths,
            sample_rate=rate,
            stored_snr=stored,
            rate_known=self.sample_rate is not None,
        )
        return drawn, center

    def key_names(self) -> tuple[str, ...]:
        """The keys every batch gets from the chain, in order (those of a batch of no rows)."""
        if self._key_names is not None:
            return self._key_names
        none = np.zeros(0, dtype=np.int64)
        stored = {
            key: np.zeros(0) for step in self.chain.transforms if (key := getattr(step, "stored_snr", None))
        }
        drawn = draw(
            self.chain,
            seed=self.seed,
            epoch=0,
            ordinals=none,
            record_lengths=none,
            sample_rate=np.zeros(0),
            stored_snr=stored,
            rate_known=self.sample_rate is not None,
        )
        self._key_names = (*keys(self.chain, drawn), *reports(self.chain, drawn, np.zeros(0)))
        return self._key_names

    def record_lengths(self, state: ProcessState, ordinals: np.ndarray) -> np.ndarray:
        """Each record's stored length along the chain's time axis (kept once read)."""
        return self.numbers.lengths(state, ordinals, self.axis, self.read_fields)

    def final_lengths(self, state: ProcessState, ordinals: np.ndarray, epoch: int) -> np.ndarray:
        """Each record's length after the chain in `epoch` (its stored length unless it resamples)."""
        lengths = self.record_lengths(state, ordinals)
        if not self.chain.resamples:
            return lengths
        return self._draw(state, ordinals, lengths, epoch)[0].final_lengths

    def read(self, batch: BatchRead) -> dict[str, np.ndarray]:
        """The batch, augmented, with its parameter keys, its labels moved and its extras."""
        if batch.window is None:
            arrays, drawn, center, placement = self._read_whole(batch)
        elif self.chain.moves_samples:
            arrays, drawn, center, placement = self._read_spans(batch)
        else:
            arrays, drawn, center, placement = self._read_window(batch)
        arrays.update(keys(self.chain, drawn))
        arrays.update(reports(self.chain, drawn, center))
        batch.extras.add(
            arrays,
            batch.ordinals,
            batch.state,
            placement.starts,
            placement.length,
            moved=self._motion(drawn, placement, center) if batch.extras.annotations else None,
        )
        return arrays

    def _motion(
        self, drawn: Drawn, placement: Placement, center: np.ndarray | None
    ) -> Callable[..., tuple[dict[str, np.ndarray], np.ndarray]]:
        def moved(
            spec: Annotations, items: dict[str, np.ndarray], counts: np.ndarray
        ) -> tuple[dict[str, np.ndarray], np.ndarray]:
            time_fields = tuple(name for name, axis in spec.positions.items() if axis == self.axis)
            if not time_fields and not spec.frequencies:
                return items, counts
            return follow(
                chain=self.chain,
                drawn=drawn,
                name=spec.name,
                items=items,
                counts=counts,
                time_fields=time_fields,
                frequency_fields=spec.frequencies,
                placement=placement,
                center_frequency=center,
            )

        return moved

    def _rows(
        self,
        drawn: Drawn,
        batch: BatchRead,
        sources: Mapping[str, np.ndarray],
        outputs: Mapping[str, np.ndarray],
        src_start: np.ndarray,
        record_length: np.ndarray,
        out_start: np.ndarray,
        held: np.ndarray | None = None,
    ) -> object:
        """The chain from each augmented field's source rows into its output rows (the same
        arrays: in place), for the read to run on each row as it decodes it. `held`, a padded
        window's positions each row holds as the read writes them, ends each row's record there.

        Every field gets the same draws (one phase, one shift...) but noise of
        its own, as two receivers of one emitter would: each field's channels
        are numbered apart in the noise's key. The noise's measured power (and
        so its sigma2 and SNR after) is each field's own, and the batch
        reports the first field's: the core writes a noise step's SNR after
        into the first field's parameters, the draws, and the others' copies.
        """
        from sds_loader import _native

        fields = []
        for k, item in enumerate(self.fields):
            params = drawn.params if k == 0 else drawn.params.copy()
            fields.append(
                (
                    complex_rows(sources[item.name], item.pairs),
                    complex_rows(outputs[item.name], item.pairs),
                    params,
                    k << 32,
                )
            )
        return _native.AugmentRows(
            drawn.kinds,
            self.seed,
            batch.epoch,
            batch.ordinals,
            src_start,
            record_length,
            out_start,
            fields,
            held=held,
        )

    def _read_in_place(
        self,
        batch: BatchRead,
        starts: np.ndarray | None,
        length: int | None,
        finish: Callable[[Schema, dict[str, np.ndarray]], object],
    ) -> dict[str, np.ndarray]:
        """The batch as the reader reads it, `finish`'s chain run on each row as it is decoded."""
        return batch_read.read_batch(
            batch.state,
            batch.layouts,
            batch.ordinals,
            starts,
            out=batch.out,
            allocator=batch.allocator,
            window=batch.window,
            window_length=length,
            threads=batch.threads,
            stats=batch.stats,
            started=batch.started,
            finish=finish,
        )

    def _read_whole(
        self, batch: BatchRead
    ) -> tuple[dict[str, np.ndarray], Drawn, np.ndarray | None, Placement]:
        rows = batch.ordinals.size
        first = self.fields[0]
        zeros = np.zeros(rows, dtype=np.int64)
        made: list[tuple[Drawn, np.ndarray | None]] = []

        def finish(_: Schema, arrays: dict[str, np.ndarray]) -> object:
            # A row's length is its field's, known once the batch's arrays are.
            length = complex_rows(arrays[first.name], first.pairs).shape[-1]
            lengths = np.full(rows, length, dtype=np.int64)
            made.append(self._draw(batch.state, batch.ordinals, lengths, batch.epoch))
            return self._rows(made[-1][0], batch, arrays, arrays, zeros, lengths, zeros)

        arrays = self._read_in_place(batch, None, None, finish)
        if not made:  # no rows: nothing was drawn
            made.append(self._draw(batch.state, batch.ordinals, zeros, batch.epoch))
        drawn, center = made[-1]
        return arrays, drawn, center, Placement(None, None)

    def _starts(
        self, batch: BatchRead, lengths_of: Callable[[np.ndarray], np.ndarray]
    ) -> tuple[np.ndarray, int]:
        """Each row's window start (given, else the crop's under `epoch`) and the batch's window length."""
        window = batch.window
        assert window is not None
        ordinals = batch.ordinals
        if batch.starts is not None:
            starts = normalize_starts(batch.starts, ordinals.size)  # type: ignore[arg-type]
        else:
            starts = window_crop(window, ordinals, lengths_of, seed=0, epoch=batch.epoch)
        length = batch_window_length(window, ordinals, starts, lengths_of)
        assert length is not None
        return starts, length

    def _read_window(
        self, batch: BatchRead
    ) -> tuple[dict[str, np.ndarray], Drawn, np.ndarray | None, Placement]:
        state = batch.state
        starts, length = self._starts(batch, lambda ordinals: self.record_lengths(state, ordinals))
        first = self.fields[0].name
        made: list[tuple[Drawn, np.ndarray | None]] = []

        def finish(_: Schema, arrays: dict[str, np.ndarray]) -> object:
            # Samples past a padded row's valid ones are outside its record,
            # and a pointwise chain needs no more of the record than that:
            # the core ends each row where the read says the first augmented
            # field's record does, in the lengths it writes as it decodes.
            ends = starts + length
            made.append(self._draw(state, batch.ordinals, ends, batch.epoch))
            held = arrays.get(length_key(first))
            return self._rows(made[-1][0], batch, arrays, arrays, starts, ends, starts, held)

        arrays = self._read_in_place(batch, starts, length, finish)
        if not made:
            made.append(self._draw(state, batch.ordinals, starts + length, batch.epoch))
        drawn, center = made[-1]
        held = arrays.get(length_key(first))
        if held is not None:
            # The labels clip time items to each record's end, known now.
            drawn.lengths[...] = (starts + held)[:, None]
        return arrays, drawn, center, Placement(starts, length)

    def _read_spans(
        self, batch: BatchRead
    ) -> tuple[dict[str, np.ndarray], Drawn, np.ndarray | None, Placement]:
        from sds_loader import _native

        state, ordinals, window = batch.state, batch.ordinals, batch.window
        assert window is not None
        stored = self.record_lengths(state, ordinals)
        drawn, center = self._draw(state, ordinals, stored, batch.epoch)
        final = drawn.final_lengths
        position = {int(o): k for k, o in enumerate(ordinals.tolist())}
        starts, length = self._starts(batch, lambda asked: final[[position[int(o)] for o in asked]])
        _refuse_outside(window, ordinals, starts, length, final)
        src_start, src_length, _ = _native.augment_spans(drawn.kinds, drawn.params, starts, length, stored)
        spans = self._span_layouts(batch.layouts, window)
        schema = spans.known(state, int(ordinals[0]) if ordinals.size else 0, lambda: None)
        others = [
            spec for spec in schema.fields if spec.window_axis is not None and spec.name not in self._names()
        ]
        last = np.maximum(stored - 1, 0)
        low = np.clip(src_start, 0, last)
        high = np.clip(src_start + src_length, low, stored)
        if others:
            low = np.minimum(low, np.clip(starts, 0, last))
            high = np.maximum(high, np.clip(starts + length, low, stored))
        read_length = max(int(np.max(high - low)) if ordinals.size else 1, 1)

        def outputs(read: Schema) -> tuple[Schema, dict[str, np.ndarray]]:
            """The batch's own layout and buffers, for spans read under `read`."""
            layout = Schema(
                fields=read.fields,
                targets=read.targets,
                lengths=tuple(spec.name for spec in read.fields if spec.window_axis is not None)
                if window.pad
                else (),
            )
            arrays = batch_buffers(
                layout,
                ordinals.size,
                out=batch.out,
                allocator=batch.allocator,
                window=window,
                window_length=length,
            )
            return layout, arrays

        made: list[tuple[Schema, dict[str, np.ndarray]]] = []

        def finish(read: Schema, spanned: dict[str, np.ndarray]) -> object:
            # The chain reads each row's span and writes the batch's own
            # buffers, made here so that it can as the row is decoded.
            made.append(outputs(read))
            return self._rows(drawn, batch, spanned, made[-1][1], low, stored, starts)

        source = batch_read.read_batch(
            state,
            spans,
            ordinals,
            low,
            out=None,
            allocator=None,
            window=spans.window,
            window_length=read_length,
            threads=batch.threads,
            stats=batch.stats,
            started=batch.started,
            finish=finish,
        )
        layout, arrays = made[-1] if made else outputs(spans.last if spans.last is not None else schema)
        batch.layouts.last = layout
        for spec in layout.fields:
            if spec.window_axis is None:
                arrays[spec.name][...] = source[spec.name]
            elif spec.name not in self._names():
                arrays[spec.name][...] = _cut(source[spec.name], spec.window_axis + 1, starts - low, length)
        for target in layout.targets:
            arrays[target.key][...] = source[target.key]
        for name in layout.lengths:
            ends = final if name in self._names() else stored
            arrays[length_key(name)][...] = np.clip(ends - starts, 0, length)
        return arrays, drawn, center, Placement(starts, length)

    def _names(self) -> tuple[str, ...]:
        return tuple(item.name for item in self.fields)

    def _span_layouts(self, layouts: Layouts, window: Window) -> Layouts:
        if self._spans is None:
            self._spans = Layouts(
                uri=layouts.uri,
                fields=layouts.fields,
                window=Window(window.axis, None, pad=True),
                labels=layouts.labels,
            )
        return self._spans


def _refuse_outside(
    window: Window, ordinals: np.ndarray, starts: np.ndarray, length: int, final: np.ndarray
) -> None:
    """A window must start inside its row's final record, and fit in it unless it pads."""
    outside = (starts < 0) | (starts >= final) | ((starts + length > final) & (not window.pad))
    if outside.any():
        k = int(np.argmax(outside))
        raise IndexError(
            f"record {int(ordinals[k])}: window of {length} positions at start {int(starts[k])} does not "
            "fit in "
            f"its {int(final[k])} positions after the augmentation chain; pass a start from 0 to "
            f"{max(int(final[k]) - (1 if window.pad else length), 0)}"
            + ("" if window.pad else ", or Window(..., pad=True) to zero-fill")
        )


def _cut(data: np.ndarray, axis: int, offsets: np.ndarray, length: int) -> np.ndarray:
    """Each row's `length` positions along `axis` from its offset (zero past the data)."""
    moved = np.moveaxis(data, axis, 1)
    index = offsets[:, None] + np.arange(length)[None, :]
    inside = index < moved.shape[1]
    picked = np.take_along_axis(
        moved, np.minimum(index, moved.shape[1] - 1).reshape(index.shape + (1,) * (moved.ndim - 2)), axis=1
    )
    picked = np.where(inside.reshape(inside.shape + (1,) * (moved.ndim - 2)), picked, 0)
    return np.moveaxis(picked, 1, axis)
