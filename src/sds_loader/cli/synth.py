"""`sds-loader synth PATH`: write a labelled dataset of synthetic captures to try.

The records are sds_loader.cli.synthetic's (BPSK, QPSK, 16-QAM and FM at several
SNRs, label in the metadata), written with signal_dataset's own writer, so
what is read back is exactly what any SDS reader sees. The README's examples
start from `sds-loader synth captures.sds`.
"""

from __future__ import annotations

import os

from sds_loader.cli import synthetic
from sds_loader.cli.progress import progress
from sds_loader.cli.textfmt import size

DEFAULT_RECORDS = 4096
DEFAULT_LENGTH = 1024


def run(
    path: str,
    *,
    records: int = DEFAULT_RECORDS,
    length: int = DEFAULT_LENGTH,
    variable_length: bool = False,
    writer_options: str | None = None,
    seed: int = 0,
    show_progress: bool = True,
    bursts: bool = False,
) -> int:
    if bursts:
        if variable_length:
            raise ValueError("--bursts writes captures of one length; drop --variable-length")
        return _run_bursts(
            path,
            records=records,
            length=length,
            writer_options=writer_options,
            seed=seed,
            show_progress=show_progress,
        )
    with progress(records, f"writing {path}", enabled=show_progress) as bar:
        dataset = synthetic.write_captures(
            path,
            records,
            length,
            seed,
            variable_length=variable_length,
            writer_options=writer_options,
            on_record=lambda: bar.update(1),
        )
    samples = f"{length // 2} to {length}" if variable_length else f"{length}"
    levels = ", ".join(f"{level:g}" for level in synthetic.SNR_LEVELS_DB)
    print(
        f"wrote {len(dataset)} captures of {samples} complex64 samples to {path} "
        f"({size(_disk_bytes(path))} on disk):\n"
        f"  field 'samples'; metadata 'label' (0-{len(synthetic.MODULATIONS) - 1}: "
        f"{', '.join(synthetic.MODULATIONS)}), 'modulation', 'snr_db' ({levels})\n"
        f"next: sds-loader inspect {path}"
    )
    return 0


def _disk_bytes(root: str) -> int:
    return sum(
        os.path.getsize(os.path.join(folder, name)) for folder, _, names in os.walk(root) for name in names
    )


def _run_bursts(
    path: str, *, records: int, length: int, writer_options: str | None, seed: int, show_progress: bool
) -> int:
    from sds_loader.cli import synthetic_bursts

    with progress(records, f"writing {path}", enabled=show_progress) as bar:
        dataset = synthetic_bursts.write_burst_captures(
            path, records, length, seed, writer_options=writer_options, on_record=lambda: bar.update(1)
        )
    print(
        f"wrote {len(dataset)} captures of {length} complex64 samples with 0-{synthetic_bursts.MAX_BURSTS} "
        f"bursts each to {path} ({size(_disk_bytes(path))} on disk):\n"
        f"  field 'samples'; metadata 'label', 'modulation', 'split'; annotation set "
        f"'{synthetic_bursts.SET_NAME}' with 'intervals' (start, stop along 'time') and 'freq'\n"
        f"next: sds-loader inspect {path}"
    )
    return 0
