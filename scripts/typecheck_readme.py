"""Type-checks every ```python block of README.md (or of the pages named) with mypy --strict.

Each block is written to a file of its own in a temporary directory, padded
with blank lines so that mypy's line numbers are the page's, and all are
checked in one mypy run with the project's settings (pyproject.toml) against
the installed sds_loader. Exits with mypy's status: non-zero on any finding.

    python scripts/typecheck_readme.py [README.md docs/reading.md ...]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def python_blocks(path: str) -> list[tuple[int, str]]:
    """(first line number, text) of every fenced python block, in order."""
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    return [
        (text.count("\n", 0, match.start()) + 2, match.group(1))
        for match in re.finditer(r"^```python\n(.*?)^```$", text, re.M | re.S)
    ]


def main(argv: list[str]) -> int:
    pages = [os.path.abspath(page) for page in argv] or [os.path.join(ROOT, "README.md")]
    found = [(page, line, text) for page in pages for line, text in python_blocks(page)]
    if not found:
        print(f"{' '.join(pages)}: no python blocks", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="readme-blocks-") as scratch:
        files = []
        shown: dict[str, str] = {}
        for page, line, text in found:
            # A module name of its own for each block: page number and line.
            name = os.path.join(scratch, f"page{pages.index(page)}_md_line_{line}.py")
            with open(name, "w", encoding="utf-8") as handle:
                handle.write("\n" * (line - 1) + text)
            files.append(name)
            shown[f"page{pages.index(page)}"] = os.path.relpath(page, ROOT)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "mypy",
                "--strict",
                "--config-file",
                os.path.join(ROOT, "pyproject.toml"),
                "--cache-dir",
                os.path.join(scratch, ".mypy_cache"),
                *files,
            ],
            capture_output=True,
            text=True,
        )
        # Name the page, not the scratch files: "README.md:60 (block at line 58): ...".
        output = done.stdout + done.stderr
        output = re.sub(
            r"\S*(page\d+)_md_line_(\d+)\.py:(\d+)",
            lambda m: f"{shown[m.group(1)]}:{m.group(3)} (block at line {m.group(2)})",
            output,
        )
        print(output, end="")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
