"""The named classes of damage sds_loader refuses where signal_dataset still reads the record.

The damage tests (test_differential.py, test_corruption_sweep.py) let
sds_loader refuse a record signal_dataset reads only when the refusal is one
of these, each documented in the README ("Errors"): a reader that refuses
more, or for another reason, fails them. A class is matched on the
CorruptShardError's message, the one place the native core says what check
failed.
"""

from __future__ import annotations

import re

import sds_loader

#: Name (as the README gives it) -> what the refusal's message says.
STRICTER = {
    "a chunk's record-size table is checked whole": re.compile(
        r"record sizes claim \d+ bytes for \d+ records|record sizes \(\w+\) decompresses to the wrong length"
        r"|record sizes \(\w+\) declare \d+ decoded bytes, but their \d+ compressed bytes can yield at most"
    ),
}


def stricter_class(error: BaseException) -> str | None:
    """The class `error` belongs to, or None when it is no sanctioned refusal."""
    if not isinstance(error, sds_loader.CorruptShardError):
        return None
    for name, pattern in STRICTER.items():
        if pattern.search(str(error)):
            return name
    return None
