"""torch, for the test modules and tests that cannot run without it.

`from torch_required import torch` (or `import torch_required` where the
name itself is not used) first among a test module's imports skips that
module where torch is not installed; inside a test, it skips that test.
Ruff sorts this module ahead of all others (pyproject.toml), so a module's
imports of torch.utils.data or sds_loader.torch below it never run without
torch.

torch is optional for sds-loader (its `torch` extra), and the suite runs
without it on Python 3.12 and 3.13 (scripts/test_python.sh), where the
tests below skip saying why; the suite on Python 3.11 runs them with the CPU
build of torch that scripts/bootstrap.sh installs. Only a torch that is not
installed skips: one that is installed but fails to import is an error of
the tests that need it, as any other would be.
"""

from __future__ import annotations

import pytest

#: Why the tests that need torch were skipped, as the skip summary says it.
REASON = (
    "torch is not installed (the `torch` extra): this test needs it, and the suite on "
    "Python 3.11 (scripts/bootstrap.sh installs torch's CPU build there) runs it"
)

torch = pytest.importorskip("torch", reason=REASON)
