"""Moved to `sds_loader.torch.ring`; this name is the same module, for existing imports."""

import sys

from sds_loader.torch import ring as _moved

sys.modules[__name__] = _moved
