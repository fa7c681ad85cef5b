"""Moved to `sds_loader.storage.s3_source`; this name is the same module, for existing imports."""

import sys

from sds_loader.storage import s3_source as _moved

sys.modules[__name__] = _moved
