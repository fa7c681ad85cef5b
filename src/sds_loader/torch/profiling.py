"""Named ranges for torch.profiler, so that a trace shows sds-loader's reads beside the model.

Only the batch read is a range ("sds_loader.read_batch"): it spans one
native call that holds no GIL while its threads work, and a range per stage
would need the core to call back into Python at every change of stage, which
is what keeps the stage times cheap (csrc/base/stage_clock.h). The stages
are in `SDSTorchDataset.stats()` instead. With no profiler running nothing
is recorded: one check of torch's flag a batch.
"""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager

import torch
from torch._C import _autograd

#: The range every batch read of SDSTorchDataset appears as.
READ_BATCH = "sds_loader.read_batch"


def read_batch_range() -> AbstractContextManager[object]:
    """A `record_function` range for one batch read while a profiler runs; else nothing."""
    # torch.autograd._profiler_enabled, as torch's own record_function checks it.
    if _autograd._profiler_enabled():
        return torch.profiler.record_function(READ_BATCH)
    return contextlib.nullcontext()
