"""Draw docs/augmentation.png: one capture before and after a chain, its bursts' boxes following.

    python scripts/augmentation_picture.py                    # writes docs/augmentation.png
    python scripts/augmentation_picture.py --out picture.png

Writes a few captures with bursts (what ``sds-loader synth --bursts``
writes) to a temporary directory, then reads one capture twice through
`BatchReader` with its ``bursts`` annotation set: as stored, and through a
chain of a time shift (zeros entering), a frequency shift and a spectral
inversion, each at a fixed value so that the picture's title can say what
was done. Each read's spectrogram is drawn with its bursts' boxes as the
batch returned them: the boxes are not computed here, they are the reader's.

The bursts' frequencies are stored as fractions of the sample rate, so the
chain is told a sample rate of 1: its Hz are fractions of the rate. The
shift pushes the highest burst past +fs/2, where its energy wraps round to
-fs/2 and its box is clipped at the edge; the time shift pushes the last
burst past the capture's end, where it is clipped (or dropped, if less than
half of it is left). docs/augmentation.md states that rule.

Needs matplotlib (the bench extra).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

import numpy as np

from sds_loader import Annotations, BatchReader, augment
from sds_loader.cli import synthetic_bursts

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(REPO, "docs", "augmentation.png")
LENGTH = 16384
#: The capture drawn, of the seeded captures written: its three bursts show every rule at once
#: under the chain below (one crosses +fs/2 and is clipped there, one keeps just over half of
#: itself past the capture's end, one keeps less and is dropped).
ORDINAL = 39
CAPTURES = ORDINAL + 1
#: The chain, each transform at one value.
SHIFT_SAMPLES = 3000
SHIFT_FRACTION = 0.2
#: The spectrogram's FFT length and hop, in samples.
NFFT = 256
HOP = 128


def chain() -> augment.Chain:
    return augment.Chain(
        [
            augment.TimeShift(samples=(SHIFT_SAMPLES, SHIFT_SAMPLES)),
            augment.FrequencyShift(fraction=(SHIFT_FRACTION, SHIFT_FRACTION)),
            augment.SpectralInversion(),
        ],
        fields=("samples",),
        sample_rate=1.0,
    )


def bursts_set() -> Annotations:
    return Annotations(
        synthetic_bursts.SET_NAME,
        ("intervals", "freq"),
        positions={"intervals": "time"},
        frequencies={"freq": "relative"},
    )


def read(root: str, ordinal: int, with_chain: augment.Chain | None) -> dict[str, np.ndarray]:
    """One capture's samples and its bursts' (intervals, freq), as the reader returns them."""
    reader = BatchReader(root, fields=("samples",), annotations=[bursts_set()], augment=with_chain)
    batch = reader.read([ordinal])
    return {
        "samples": batch["samples"][0],
        "intervals": batch["bursts.intervals"],
        "freq": batch["bursts.freq"],
    }


def spectrogram(samples: np.ndarray) -> np.ndarray:
    """Power in dB, (frequency from -fs/2 up, time), of Hann-windowed frames of NFFT every HOP samples."""
    starts = range(0, samples.size - NFFT + 1, HOP)
    frames = np.stack([samples[s : s + NFFT] for s in starts]) * np.hanning(NFFT)
    power = np.abs(np.fft.fftshift(np.fft.fft(frames, axis=1), axes=1)) ** 2
    return 10 * np.log10(power.T + 1e-12)


def draw(path: str, before: dict[str, np.ndarray], after: dict[str, np.ndarray]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    figure, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True, constrained_layout=True)
    titles = (
        "as stored",
        f"time shift +{SHIFT_SAMPLES:,} samples, frequency shift +{SHIFT_FRACTION:g} fs, inverted",
    )
    images = [spectrogram(read_["samples"]) for read_ in (before, after)]
    # From the noise's median (dark) to the bursts' peaks.
    low, high = np.percentile(images[0], [50, 99.9])
    for ax, read_, image, title in zip(axes, (before, after), images, titles, strict=True):
        ax.imshow(
            image,
            origin="lower",
            aspect="auto",
            extent=(0, LENGTH, -0.5, 0.5),
            cmap="magma",
            vmin=low,
            vmax=high,
            interpolation="nearest",
        )
        for (start, stop), (lowest, highest) in zip(read_["intervals"], read_["freq"], strict=True):
            box = Rectangle(
                (start, lowest), stop - start, highest - lowest, fill=False, edgecolor="cyan", linewidth=1.5
            )
            ax.add_patch(box)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("sample")
    axes[0].set_ylabel("frequency (fraction of fs)")
    figure.savefig(path, dpi=80, metadata={"Software": None})
    plt.close(figure)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Draw the picture; return what each read gave (samples and boxes) and where it went."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=DEFAULT_OUT, help=f"where the PNG goes (default {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sds-bursts-") as scratch:
        root = os.path.join(scratch, "bursts.sds")
        synthetic_bursts.write_burst_captures(root, CAPTURES, LENGTH, seed=0)
        before = read(root, ORDINAL, None)
        after = read(root, ORDINAL, chain())
    draw(args.out, before, after)
    counts = f"{len(before['intervals'])} bursts before, {len(after['intervals'])} after"
    print(f"capture {ORDINAL}: {counts}; {args.out}")
    return {"before": before, "after": after, "out": args.out}


if __name__ == "__main__":
    main()
    sys.exit(0)
