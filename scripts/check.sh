#!/usr/bin/env bash
# Lint, format and type checks, as CI (.ci/run) and pre-commit
# (.pre-commit-config.yaml) run them. Each named check runs, all of them
# when none is named; every finding is printed, and the exit status is
# non-zero when any check found something:
#
#     bash scripts/check.sh                  # everything
#     bash scripts/check.sh ruff mypy        # just these
#
#   ruff          ruff check: lint (pyproject.toml, [tool.ruff.lint])
#   format        ruff format --check: the Python layout
#   mypy          mypy --strict on src/sds_loader
#   readme        mypy --strict on the python blocks of README.md and docs/
#   docs          mkdocs build --strict: the documentation site, warning-free (mkdocs.yml)
#   clang-format  clang-format --dry-run --Werror on csrc/ and fuzz/ (.clang-format)
#   stub          src/sds_loader/_native.pyi against the built extension
#
# Fixing what `format` and `clang-format` report:
#     .venv/bin/ruff format . && clang-format-14 -i csrc/*/*.cc csrc/*/*.h fuzz/*.cc fuzz/*.h
#
# Python: the environment scripts/bootstrap.sh installs into ($PYTHON, else
# the active virtual or conda environment, else .venv), else python3, with
# the `lint` and `docs` extras installed (bootstrap does); clang-format 14
# from Debian.
set -uo pipefail
cd "$(dirname "$0")/.."

. scripts/installed_python.sh
CLANG_FORMAT="${CLANG_FORMAT:-$(command -v clang-format-14 || command -v clang-format || echo clang-format-14)}"

ALL="ruff format mypy readme docs clang-format stub"
checks="${*:-$ALL}"
failed=""

run() {
    local name="$1"
    shift
    local shown="$*"
    [ "${#shown}" -le 160 ] || shown="${shown:0:157}..."
    printf '\n-- check %s: %s\n' "$name" "$shown"
    if "$@"; then
        echo "-- $name: ok"
    else
        echo "-- $name: FAILED"
        failed="$failed $name"
    fi
}

for check in $checks; do
    case "$check" in
        ruff) run ruff "$PY" -m ruff check --no-fix . ;;
        format) run format "$PY" -m ruff format --check --diff . ;;
        mypy) run mypy "$PY" -m mypy --strict src/sds_loader ;;
        readme)
            # shellcheck disable=SC2046 # one argument per page; none has a space
            run readme "$PY" scripts/typecheck_readme.py README.md $(find docs -name '*.md' | sort)
            ;;
        docs)
            # Into a directory of its own, removed after, so that the tree stays clean.
            # Not --quiet: it hides the warnings that --strict counts.
            site="$(mktemp -d)"
            run docs "$PY" -m mkdocs build --strict --site-dir "$site/site"
            rm -rf "$site"
            ;;
        clang-format)
            run clang-format "$CLANG_FORMAT" --dry-run --Werror --style=file \
                csrc/*/*.cc csrc/*/*.h fuzz/*.cc fuzz/*.h
            ;;
        stub) run stub "$PY" -m pytest -q -p no:cacheprovider tests/packaging/test_native_stub.py ;;
        *)
            echo "check.sh: unknown check '$check' (known: $ALL)" >&2
            exit 2
            ;;
    esac
done

if [ -n "$failed" ]; then
    printf '\ncheck.sh: FAILED:%s\n' "$failed"
    exit 1
fi
printf '\ncheck.sh: all passed (%s)\n' "$checks"
