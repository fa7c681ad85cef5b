"""Type-checks every ```python block of README.md with mypy --strict.

Each block is written to a file of its own in a temporary directory, padded
with blank lines so that mypy's line numbers are the README's, and all are
checked in one mypy run with the project's settings (pyproject.toml) against
the installed sds_loader. Exits with mypy's status: non-zero on any finding.

    python scripts/typecheck_readme.py [README.md]
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
    readme = os.path.abspath(argv[0] if argv else os.path.join(ROOT, "README.md"))
    blocks = python_blocks(readme)
    if not blocks:
        print(f"{readme} has no python blocks", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="readme-blocks-") as scratch:
        files = []
        for line, text in blocks:
            name = os.path.join(scratch, f"README_md_line_{line}.py")
            with open(name, "w", encoding="utf-8") as handle:
                handle.write("\n" * (line - 1) + text)
            files.append(name)
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
        # Name the README, not the scratch files: "README.md:60 (block at line 58): ...".
        output = done.stdout + done.stderr
        output = re.sub(
            r"\S*README_md_line_(\d+)\.py:(\d+)",
            lambda m: f"README.md:{m.group(2)} (block at line {m.group(1)})",
            output,
        )
        print(output, end="")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
