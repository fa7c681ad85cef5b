#!/usr/bin/env bash
# Installs everything sds-loader needs on a fresh Debian machine, then builds
# the extension in place. Safe to run again: each step is a no-op when done.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

# The C++ core links these; clang and its runtime build the fuzz targets.
APT_PACKAGES="build-essential cmake pkg-config libsnappy-dev libbrotli-dev libhighwayhash-dev nlohmann-json3-dev clang-14 libclang-rt-14-dev"
missing=""
for package in $APT_PACKAGES; do
    dpkg -s "$package" >/dev/null 2>&1 || missing="$missing $package"
done
if [ -n "$missing" ]; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
fi

PYTHON="${PYTHON:-python3}"
# torch 2.13.0's CPU build: an unpinned torch would pull a multi-GB CUDA build.
"$PYTHON" -m pip install -q "torch==2.13.0" "numpy<2.5" "scikit-build-core>=0.10" "pybind11>=2.12" ninja
# torchdata 0.11 (StatefulDataLoader) asks only for torch>=2; without --no-deps a
# resolver could still swap torch for another build.
"$PYTHON" -m pip install -q --no-deps "torchdata==0.11.0"
"$PYTHON" -m pip install -q --no-build-isolation -e ".[test,bench,torch]"
