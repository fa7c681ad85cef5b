"""Moved to `sds_loader.storage.fallback_helper`; this name is the same module, for existing imports."""

import sys

from sds_loader.storage import fallback_helper as _moved

sys.modules[__name__] = _moved
