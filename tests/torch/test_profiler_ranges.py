"""Batch reads appear in torch.profiler traces as named ranges, and only while one runs."""

from __future__ import annotations

from torch_required import torch

import contextlib
import json

from native_required import _native  # noqa: F401
from sds_factory import write_dataset
from torch.profiler import ProfilerActivity, profile
from torch.utils.data import DataLoader

from sds_loader.torch import SDSTorchDataset, collate
from sds_loader.torch.profiling import READ_BATCH, read_batch_range


def test_an_exported_trace_holds_a_range_per_batch_read(tmp_path):
    root = tmp_path / "ds"
    write_dataset(root, 12, records_per_shard=6)
    dataset = SDSTorchDataset(str(root))
    loader = DataLoader(dataset, batch_size=4, collate_fn=collate)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for batch in loader:
            torch.mm(torch.ones(8, 8), torch.ones(8, 8))  # the model's work, beside it
            assert batch["inputs"].shape[0] == 4
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace))
    events = json.loads(trace.read_text())["traceEvents"]
    names = [event.get("name") for event in events]
    assert names.count(READ_BATCH) == 3
    assert "aten::mm" in names
    ranges = [event for event in events if event.get("name") == READ_BATCH]
    assert all(event["dur"] > 0 for event in ranges)


def test_no_profiler_no_range():
    assert isinstance(read_batch_range(), contextlib.nullcontext)
    with profile(activities=[ProfilerActivity.CPU]):
        assert not isinstance(read_batch_range(), contextlib.nullcontext)
