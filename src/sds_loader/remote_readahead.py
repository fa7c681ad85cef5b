"""Moved to `sds_loader.storage.remote_readahead`; this name is the same module, for existing imports."""

import sys

from sds_loader.storage import remote_readahead as _moved

sys.modules[__name__] = _moved
