"""The extension exports its entry point, not the codecs linked into it.

libcurl, which the extension links for object storage, loads the system's
own zstd and brotli into the same group of libraries. Were the vendored
codecs' symbols exported, the system libraries' internal calls would bind to
them (another version, other structure layouts), as Debian's zstd 1.5.4 once
did here, decoding a frame as 1.5.7 would (tests/core/test_zstd_frames.py).
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from native_required import _native


@pytest.mark.skipif(shutil.which("nm") is None, reason="needs binutils' nm")
def test_no_codec_symbol_is_exported():
    listed = subprocess.run(
        ["nm", "-D", "--defined-only", _native.__file__], capture_output=True, text=True, check=True
    ).stdout
    names = [line.split()[-1] for line in listed.splitlines() if line.strip()]
    assert "PyInit__native" in names
    leaked = [
        name for name in names if re.match(r"(ZSTD|ZDICT|HUF|FSE|Brotli|_ZN6snappy|_ZN10highwayhash)", name)
    ]
    assert leaked == [], leaked[:20]
