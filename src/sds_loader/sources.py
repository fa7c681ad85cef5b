"""Moved to `sds_loader.storage.sources`; this name is the same module, for existing imports."""

import sys

from sds_loader.storage import sources as _moved

sys.modules[__name__] = _moved
