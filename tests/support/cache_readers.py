"""What the node-cache tests share about a reader of a remote dataset."""

from __future__ import annotations

import sds_loader


def settled(reader: sds_loader.BatchReader) -> sds_loader.BatchReader:
    """`reader` once its node-cache writes (made off the reads' path) are done."""
    source = reader.opened_state().source
    assert source is not None and source.wait_readahead(60)
    return reader
