#!/usr/bin/env bash
# Builds a release's sdist and wheels from the tree of its tag, never from
# the working tree, so what is published is exactly what the tag names:
#
#     git tag -a v0.4.0 -m "sds-loader 0.4.0"
#     bash scripts/release.sh v0.4.0 [DIST]      # DIST defaults to dist/v0.4.0
#
# Refuses a tag that does not exist, whose tree's version
# (src/sds_loader/_version.py) is not the tag's, or whose changelog has no
# dated section for it. The sdist comes from the build backend itself; the
# wheels from scripts/build_wheel.sh of the tag's tree, one for each
# interpreter in $PYTHONS (default: the project's .venv, then python3.12 and
# python3.13 where found), each repaired by auditwheel. SHA256SUMS lists
# them all.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 1 ]; then
    echo "usage: bash scripts/release.sh TAG [DIST]" >&2
    exit 2
fi
tag="$1"
if ! git rev-parse -q --verify "refs/tags/$tag^{commit}" >/dev/null; then
    echo "release: there is no tag $tag; make it on the commit to release with: git tag -a $tag" >&2
    exit 1
fi
version="${tag#v}"
dist="${2:-dist/$tag}"

tree="$(mktemp -d)"
trap 'rm -rf "$tree"' EXIT
git archive "$tag" | tar -x -C "$tree"
if ! grep -qx "__version__ = \"$version\"" "$tree/src/sds_loader/_version.py"; then
    echo "release: $tag's tree does not say version $version in src/sds_loader/_version.py;" \
        "bump it, commit, and move the tag" >&2
    exit 1
fi
if ! grep -q "^## $version ([0-9-]*)" "$tree/CHANGELOG.md"; then
    echo "release: $tag's CHANGELOG.md has no section '## $version (YYYY-MM-DD)'; date it, commit," \
        "and move the tag" >&2
    exit 1
fi

mkdir -p "$dist"
dist="$(cd "$dist" && pwd)"
. scripts/installed_python.sh
(cd "$tree" && "$PY" -c "from scikit_build_core.build import build_sdist; build_sdist('$dist')")

pythons="${PYTHONS:-}"
if [ -z "$pythons" ]; then
    pythons="$PY"
    for minor in 3.12 3.13; do
        for found in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$minor".*/bin/python"$minor" \
            "$(command -v "python$minor" || true)"; do
            if [ -x "$found" ]; then
                pythons="$pythons $found"
                break
            fi
        done
    done
fi
for python in $pythons; do
    PYTHON="$python" bash "$tree/scripts/build_wheel.sh" "$dist"
done
(cd "$dist" && sha256sum sds_loader-"$version"* >SHA256SUMS && cat SHA256SUMS)
