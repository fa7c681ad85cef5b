"""Moved to `sds_loader.storage.stores`; this name is the same module, for existing imports."""

import sys

from sds_loader.storage import stores as _moved

sys.modules[__name__] = _moved
