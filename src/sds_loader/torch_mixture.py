"""Moved to `sds_loader.torch.mixture`; this name is the same module, for existing imports."""

import sys

from sds_loader.torch import mixture as _moved

sys.modules[__name__] = _moved
