#!/usr/bin/env bash
# Runs the test suite against a build of the extension with AddressSanitizer
# and UndefinedBehaviorSanitizer, leaving the normal editable install as it
# is. Any sanitizer report aborts the process that hits it, so the test that
# drove it fails and this script exits non-zero.
#
#     bash scripts/test_sanitized.sh [PYTEST ARGS...]   # default: the Quick start's suite (less fuzz and wheel), then the corruption sweep whole
#     bash scripts/test_sanitized.sh --build-only       # the sanitized build alone (CI makes it beside other steps)
#     bash scripts/test_sanitized.sh --built [ARGS...]  # the run alone, on the build --build-only made
#
# Python: the one scripts/bootstrap.sh installed into ($PYTHON, else the
# active virtual or conda environment, else the project's .venv).
# The build goes to build/sanitized (kept, so a rerun only rebuilds what
# changed) and the extension to build/sanitized-site.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/installed_python.sh
SITE="$PWD/build/sanitized-site"

build=yes
case "${1:-}" in
--build-only) build=only; shift ;;
--built) build=no; shift ;;
esac
if [ "$build" != no ]; then
    rm -rf "$SITE"
    SDS_LOADER_SANITIZE=ON "$PY" -m pip install -q --no-build-isolation --no-deps --target "$SITE" \
        --config-settings=build-dir="$PWD/build/sanitized" .
    if [ "$build" = only ]; then
        echo "built the sanitized extension into $SITE"
        exit 0
    fi
elif [ ! -d "$SITE/sds_loader" ]; then
    echo "test_sanitized: no sanitized build in $SITE (--build-only first)" >&2
    exit 2
fi
# The editable install's import hook would load the normal extension. Every
# Python this run starts (pytest, its xdist workers, spawned DataLoader
# workers, a test's subprocesses) imports this sitecustomize from PYTHONPATH,
# which drops the hook and puts the sanitized package first.
STARTUP="$PWD/build/sanitized-startup"
mkdir -p "$STARTUP"
cat > "$STARTUP/sitecustomize.py" <<PY
import sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in type(f).__module__]
sys.path.insert(0, "$SITE")
PY
export PYTHONPATH="$STARTUP${PYTHONPATH:+:$PYTHONPATH}"

# libstdc++ is preloaded with libasan: Python does not link it, and ASan's
# __cxa_throw interceptor needs it at start-up. Leaks are not checked: the
# interpreter itself keeps memory to the end. pytest captures Python's
# streams only (--capture=sys): a report ends its process at once, and one
# written to a captured descriptor would be lost with it. SIGBUS is left to
# the process (handle_sigbus=0): the reader's own guard of mapped copies, and
# the tests of how it chains to other handlers, are what runs there. Tests
# skip where they fork (SDS_LOADER_SANITIZED, see tests/conftest.py): this
# AddressSanitizer does not keep its allocator consistent across fork() while
# other threads allocate, so a forked child can wait forever on its locks.
sanitized() {
    SDS_LOADER_SANITIZED=1 \
    LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so)" \
    ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:handle_sigbus=0 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$@"
}
sanitized_pytest() {
    sanitized "$PY" -m pytest --capture=sys "$@"
}
sanitized "$PY" -c "import sds_loader._native as native; assert native.__file__.startswith('$SITE'), native.__file__"

if [ $# -gt 0 ]; then
    sanitized_pytest "$@"
    exit
fi
# The Quick start's tests (its -m "not slow" restated, since -m replaces
# addopts' own): the slow ones are end-to-end runs of many processes, whose
# native work the fast tests already drive. Then the corruption sweep whole,
# slow parameters too: damage at every offset of every codec's shard, where a
# missing bounds check would read past a buffer that only the sanitizer sees.
sanitized_pytest -q -n auto tests --deselect tests/core/test_fuzz_smoke.py -m "not wheel and not slow"
sanitized_pytest -q -n auto tests/core/test_corruption_sweep.py -m ""
