#!/usr/bin/env bash
# Installs everything sds-loader needs on a fresh Debian or Ubuntu machine,
# builds the extension in place, then runs the rest of its command line, if
# any, inside the Python environment it installed into:
#
#     bash scripts/bootstrap.sh                       # set up only
#     bash scripts/bootstrap.sh sds-loader bench      # set up, then benchmark
#     bash scripts/bootstrap.sh python -m pytest -q -n auto   # set up, then test
#
# Which environment: $PYTHON's, when set (installs into that interpreter's
# environment, whatever it is); else the active virtual or conda environment;
# else a project environment in .venv, made from `python3` on PATH. The last
# is what a stock Debian 12 or Ubuntu 24.04 gets, whose system Python refuses
# pip installs (PEP 668, "externally managed"). Safe to run again: each step
# is a no-op when done, except the extension's incremental rebuild.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

# The C++ core links these (zstd and snappy are vendored; libcurl fetches
# from object storage); python3-dev and
# python3-venv let the system Python build the extension and make .venv;
# clang and its runtime build the fuzz targets; clang-format-14 checks the
# C++ style (scripts/check.sh).
APT_PACKAGES="build-essential cmake pkg-config libbrotli-dev libcurl4-openssl-dev libhighwayhash-dev nlohmann-json3-dev rapidjson-dev python3-dev python3-venv clang-14 libclang-rt-14-dev clang-format-14"
missing=""
for package in $APT_PACKAGES; do
    dpkg -s "$package" >/dev/null 2>&1 || missing="$missing $package"
done
if [ -n "$missing" ]; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
fi

if [ -n "${PYTHON:-}" ]; then
    PY="$PYTHON"
elif [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then
    PY="$VIRTUAL_ENV/bin/python"
elif [ -n "${CONDA_PREFIX:-}" ] && [ -x "$CONDA_PREFIX/bin/python" ]; then
    PY="$CONDA_PREFIX/bin/python"
else
    # A broken .venv (its interpreter removed or upgraded away) is made again.
    if ! .venv/bin/python -c "" >/dev/null 2>&1; then
        echo "bootstrap: making a virtual environment in $PWD/.venv"
        rm -rf .venv
        python3 -m venv .venv
    fi
    PY="$PWD/.venv/bin/python"
fi

# torch 2.13.0's CPU build: an unpinned torch would pull a multi-GB CUDA build.
"$PY" -m pip install -q "torch==2.13.0" "numpy<2.5" "scikit-build-core>=0.11" "pybind11>=2.13" ninja
# torchdata 0.11 (StatefulDataLoader) asks only for torch>=2; without --no-deps a
# resolver could still swap torch for another build.
"$PY" -m pip install -q --no-deps "torchdata==0.11.0"
# The ray extra (sds_loader.ray and its tests) brings pyarrow and Ray's own
# dependencies: scripts/constraints.txt keeps numpy and torch as installed above.
# The docs extra builds the documentation site (mkdocs.yml).
EXTRAS="test,test-torch,bench,torch,lint,ray,docs"
# The extension's build (about two minutes of both cores of a small machine,
# from nothing) runs beside the resolution, download and unpacking of the
# extras' dependencies, which wait on the network and the disk rather than
# compute: so sds-loader itself is installed without dependencies, and they
# from pyproject.toml's lists, to the same pins.
scratch="$(mktemp -d)"
build=""
# A failed install also ends the pip that builds beside it, rather than
# leave it running after this script has exited.
trap '[ -z "$build" ] || kill "$build" 2>/dev/null; rm -rf "$scratch"' EXIT
"$PY" - "$EXTRAS" >"$scratch/requirements.txt" <<'LIST'
import sys
import tomllib

with open("pyproject.toml", "rb") as handle:
    project = tomllib.load(handle)["project"]
wanted = list(project["dependencies"])
for extra in sys.argv[1].split(","):
    wanted += project["optional-dependencies"][extra]
print("\n".join(wanted))
LIST
"$PY" -m pip install -q --no-build-isolation --no-deps -e . >"$scratch/build.log" 2>&1 &
build=$!
"$PY" -m pip install -q -c scripts/constraints.txt -r "$scratch/requirements.txt"
if ! wait "$build"; then
    build=""
    cat "$scratch/build.log" >&2
    echo "bootstrap: building the extension failed (its log is above)" >&2
    exit 1
fi
build=""
rm -rf "$scratch"

if [ $# -gt 0 ]; then
    # The environment's own entry points first on PATH; `python` and
    # `python3` mean exactly the interpreter installed into.
    BIN="$("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')"
    case "$1" in python | python3) shift; set -- "$PY" "$@" ;; esac
    PATH="$BIN:$PATH" exec "$@"
fi
