#!/usr/bin/env bash
# Rebuilds tests/slow_tests.txt from one timed run of the whole suite: every
# test whose setup, call and teardown took 2 s or more on this machine. Run it
# on the 2-core machine CI uses, with nothing else running.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/installed_python.sh
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
"$PY" -m pytest -q -m "" -p no:cacheprovider --durations=0 --durations-min=0.5 tests | tee "$log"
{
    sed -n '/^#/p' tests/slow_tests.txt
    # A test's id is the rest of its line: parameters may hold spaces.
    awk 'match($0, /^[0-9.]+s (setup|call|teardown) +/) {
             seconds = $1; sub(/s$/, "", seconds)
             t[substr($0, RLENGTH + 1)] += seconds
         }
         END { for (k in t) if (t[k] >= 2.0) print k }' "$log" | sort
} >"$log.new"
mv "$log.new" tests/slow_tests.txt
echo "tests/slow_tests.txt: $(grep -vc '^#' tests/slow_tests.txt) slow tests"
