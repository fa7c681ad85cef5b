"""The README runs as written: its Quick start shape, and every python block.

The python blocks are run, in order, in a directory where the README's own
`sds-loader synth captures.sds` block has just run, each block in a fresh
namespace of one child process. A block that stops working (an API renamed, a
shape changed, a name misspelt) fails here with the README line it came from.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
import textwrap

import pytest
from repo_paths import REPO

README = os.path.join(REPO, "README.md")


def blocks(language: str) -> list[tuple[int, str]]:
    """(first line number, text) of every fenced block in `language`, in order."""
    with open(README, encoding="utf-8") as handle:
        text = handle.read()
    found = []
    for match in re.finditer(rf"^```{language}\n(.*?)^```$", text, re.M | re.S):
        found.append((text.count("\n", 0, match.start()) + 2, match.group(1)))
    return found


def section(title: str) -> str:
    with open(README, encoding="utf-8") as handle:
        text = handle.read()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_quick_start_is_two_commands_that_do_all_setup():
    quick = section("Quick start")
    fenced = re.findall(r"^```(\w*)\n(.*?)^```$", quick, re.M | re.S)
    assert [language for language, _ in fenced] == ["bash"]
    commands = [line for line in fenced[0][1].splitlines() if line.strip()]
    assert len(commands) == 2, commands
    assert all(command.startswith("bash scripts/bootstrap.sh ") for command in commands)
    assert "sds-loader bench" in commands[0] and commands[0].rstrip().endswith("bench")
    assert "pytest" in commands[1]


def test_every_python_block_runs(tmp_path):
    # Most blocks read through DataLoader.
    import torch_required  # noqa: F401 - skips this test without torch

    if os.environ.get("SDS_LOADER_SANITIZED") == "1":
        # The blocks run in a child interpreter that inherits the preloaded
        # AddressSanitizer, and their DataLoaders fork workers while the
        # reader's threads run: the fork this build cannot do safely (see
        # tests/conftest.py). The plain suite runs them.
        pytest.skip("the README's DataLoaders fork workers, which this sanitizer build cannot do safely")
    synth = [text for _, text in blocks("bash") if "sds-loader synth captures.sds" in text]
    assert synth, "no ```bash block of the README runs `sds-loader synth captures.sds`"
    scripts = sysconfig.get_path("scripts")
    env = dict(os.environ, PATH=f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}")
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", synth[0]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # Other datasets the python blocks read (`sds-loader synth bursts.sds --bursts`, say).
    for _, text in blocks("bash"):
        if text.startswith("sds-loader synth ") and "captures.sds" not in text:
            done = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", text],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert done.returncode == 0, done.stdout + done.stderr

    python = blocks("python")
    assert python, "the README has no python blocks"
    runner = textwrap.dedent(
        r"""
        import json, sys
        for line, text in json.load(sys.stdin):
            # Padded so that a traceback's line numbers are the README's.
            exec(compile("\n" * (line - 1) + text, "README.md", "exec"), {"__name__": "__main__"})
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", runner],
        input=json.dumps(python),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
