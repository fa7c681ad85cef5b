"""Moved to `sds_loader.storage.fallback`; this name is the same module, for existing imports."""

import sys

from sds_loader.storage import fallback as _moved

sys.modules[__name__] = _moved
