#!/usr/bin/env bash
# Runs the test suite on another Python than the project environment's:
# builds that interpreter's wheel with scripts/build_wheel.sh, installs it
# with the test extra into a fresh virtual environment of that interpreter,
# and runs the suite there, against the installed wheel. CI (.ci/run) runs
# it for Python 3.12 and 3.13; the suite on 3.11 is the Quick start's.
#
#     bash scripts/test_python.sh /path/to/python3.12 [PYTEST ARGS...]
#
# CI builds and installs ahead of the run, at low priority beside other
# steps, then runs the suite later: `--prepare DIR` stops once DIR holds the
# wheel and its environment; `--prepared DIR` runs the suite in it.
#
#     bash scripts/test_python.sh --prepare DIR /path/to/python3.12
#     bash scripts/test_python.sh --prepared DIR [PYTEST ARGS...]
#
# The interpreter needs pip and venv, nothing else: build_wheel.sh brings
# the build requirements. torch is not installed (on PyPI, torch for Linux
# is a CUDA build of several GB), so the tests that need it skip, saying why
# (tests/support/torch_required.py); they run in the 3.11 suite, with the CPU build
# bootstrap.sh installs. The fuzz test is left to that suite too: its targets
# are C++ built by clang, the same whatever the Python. The wheel's tests
# (tests/packaging/test_wheel.py) check the wheel built here (SDS_LOADER_WHEEL)
# instead of building another.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
    echo "usage: bash scripts/test_python.sh [--prepare DIR] /path/to/python [PYTEST ARGS...]" >&2
    echo "       bash scripts/test_python.sh --prepared DIR [PYTEST ARGS...]" >&2
    exit 2
}
mode=all
case "${1:-}" in
--prepare | --prepared)
    mode="${1#--}"
    [ $# -ge 2 ] || usage
    work="$2"
    shift 2
    ;;
*)
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    ;;
esac

if [ "$mode" != prepared ]; then
    [ $# -ge 1 ] || usage
    PY="$1"
    shift
    mkdir -p "$work"
    PYTHON="$PY" bash scripts/build_wheel.sh "$work/dist"
    wheel="$(ls "$work"/dist/sds_loader-*manylinux*.whl)"
    "$PY" -m venv "$work/venv"
    # With the build requirements too: tests/packaging/test_packaging.py makes an sdist
    # with the build backend itself (no compiling).
    "$work/venv/bin/python" -c 'import tomllib
with open("pyproject.toml", "rb") as handle:
    print("\n".join(tomllib.load(handle)["build-system"]["requires"]))' >"$work/build-requirements.txt"
    "$work/venv/bin/python" -m pip install -q "$wheel[test]" -r "$work/build-requirements.txt"
    if [ "$mode" = prepare ]; then
        echo "prepared $work: $wheel"
        exit 0
    fi
else
    wheel="$(ls "$work"/dist/sds_loader-*manylinux*.whl 2>/dev/null || true)"
    if [ -z "$wheel" ] || [ ! -x "$work/venv/bin/python" ]; then
        echo "test_python: $work holds no prepared wheel and environment (--prepare DIR first)" >&2
        exit 2
    fi
fi

if [ $# -eq 0 ]; then
    # The Quick start's tests and the wheel's (which check the wheel built
    # here): the slow end-to-end runs are Python-version-blind orchestration of
    # processes, and run once, in CI's slow step on 3.11.
    set -- -q -n auto tests --deselect tests/core/test_fuzz_smoke.py -m "not slow or wheel"
fi
SDS_LOADER_WHEEL="$wheel" "$work/venv/bin/python" -m pytest "$@"
