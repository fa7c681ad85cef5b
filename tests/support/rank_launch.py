"""Starts a worker script on several ranks with torchrun (gloo, CPU) and fails with its output."""

from __future__ import annotations

import os
import subprocess
import sys


def torchrun(ranks: int, script: str, *args: str, timeout: float = 120) -> None:
    """Run `script` on `ranks` ranks of one standalone job; a rank that fails fails the caller."""
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), OMP_NUM_THREADS="1")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={ranks}",
            script,
            *args,
        ],
        capture_output=True,
        text=True,
        env=environment,
        timeout=timeout,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
