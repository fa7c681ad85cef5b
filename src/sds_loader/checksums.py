"""The three settings of `verify_checksums=`, and the one check of the argument.

- ``True`` (the default): every read checks the HighwayHash of each chunk it
  decodes (and of each block header it crosses). Bytes damaged on disk or in
  the page cache are found by the first read that touches them, whenever
  that is.
- ``"once"``: each chunk is checked the first time this process reads it;
  later reads of it trust it while the shard is the same file (local files:
  the same device, inode, size and modification time; object storage: the
  same object version, which every request pins). A shard replaced or
  rewritten is checked again as it is read. Bytes that change after the
  first read without changing the file's identity (damage on disk, a bit
  flipped in the page cache) are not found by this reader; a fresh one, or
  one with ``True``, finds them.
- ``False``: nothing is checked; damage surfaces as a parse error, or not at
  all.

Records that only signal_dataset can read are verified on every read unless
``False``: its reader knows no middle setting.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

#: What `verify_checksums=` accepts.
VerifyChecksums: TypeAlias = bool | Literal["once"]


def verify_checksums_setting(value: object) -> VerifyChecksums:
    """`value` if it is one of the three settings, else a ValueError naming them."""
    if isinstance(value, bool):
        return value
    if value == "once":
        return "once"
    raise ValueError(
        f'verify_checksums= must be True (every read), "once" (the first read of each chunk in '
        f"this process) or False (never), not {value!r}"
    )


def verifies_every_read(value: VerifyChecksums) -> bool:
    """What a reader that knows only True and False (signal_dataset's) should be given."""
    return value is not False
