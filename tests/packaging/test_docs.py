"""The pages under docs/ run as written: every python block, and the site's build.

Each page's python blocks run in order, each in a fresh namespace, in one
child process per page, in a directory where the pages' ``sds-loader synth``
blocks have run (`captures.sds`, `bursts.sds`, `recorded.sds`). A block that
stops working (an API renamed, a shape changed, a name misspelt) fails here
with the page and line it came from. Blocks fenced as ``bash`` (other than
``sds-loader synth``) or without a language are not run: that is how a page
marks a block to be read, not run (docs/contributing.md).

The site is built as CI builds it, ``mkdocs build --strict``, where the docs
extra is installed: a broken link, a page missing from the navigation or a
docstring mkdocstrings cannot render fails it.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import re
import subprocess
import sys
import sysconfig
import textwrap

import pytest
from repo_paths import REPO

ROOT = REPO
DOCS = os.path.join(ROOT, "docs")


def pages() -> list[str]:
    """Every Markdown page under docs/, as a path relative to the repository root."""
    found = glob.glob(os.path.join(DOCS, "**", "*.md"), recursive=True)
    return sorted(os.path.relpath(path, ROOT) for path in found)


def blocks(page: str, language: str) -> list[tuple[int, str]]:
    """(first line number, text) of every fenced block of `page` in `language`, in order."""
    with open(os.path.join(ROOT, page), encoding="utf-8") as handle:
        text = handle.read()
    return [
        (text.count("\n", 0, match.start()) + 2, match.group(1))
        for match in re.finditer(rf"^```{language}\n(.*?)^```$", text, re.M | re.S)
    ]


def synth_blocks() -> list[str]:
    """The pages' bash blocks that write a dataset, each once, in page order."""
    found: list[str] = []
    for page in pages():
        for _, text in blocks(page, "bash"):
            if text.startswith("sds-loader synth ") and text not in found:
                found.append(text)
    return found


# Optional parts a page's blocks import, each skipped where it is not installed
# (the suite on Python 3.12 and 3.13 has neither torch nor Ray).
OPTIONAL = {"torch": "torch", "torchdata": "torchdata", "sds_loader.torch": "torch", "sds_loader.ray": "ray"}


def needs(text: str) -> list[str]:
    imported = re.findall(r"^\s*(?:from|import)\s+([\w.]+)", text, re.M)
    wanted = {OPTIONAL[name] for name in OPTIONAL for module in imported if module.startswith(name)}
    return sorted(wanted)


RUNNABLE = [page for page in pages() if blocks(page, "python")]


def test_the_pages_have_python_blocks():
    assert len(RUNNABLE) >= 5, RUNNABLE


def test_the_readme_links_to_pages_that_exist():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert links, "the README links to no page under docs/"
    missing = sorted({link for link in links if not os.path.exists(os.path.join(ROOT, link))})
    assert not missing, missing


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A directory where every `sds-loader synth` block of the pages has run."""
    where = tmp_path_factory.mktemp("docs-datasets")
    scripts = sysconfig.get_path("scripts")
    env = dict(os.environ, PATH=f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}")
    written = synth_blocks()
    assert any("sds-loader synth captures.sds" in text for text in written), written
    for text in written:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", text],
            cwd=where,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, text + done.stdout + done.stderr
    return str(where)


@pytest.mark.parametrize("page", RUNNABLE)
def test_every_python_block_runs(page: str, request: pytest.FixtureRequest) -> None:
    python = blocks(page, "python")
    for module in needs("\n".join(text for _, text in python)):
        pytest.importorskip(module, reason=f"{page} imports {module}, which is not installed")
    if os.environ.get("SDS_LOADER_SANITIZED") == "1":
        # The blocks run in a child interpreter that inherits the preloaded
        # AddressSanitizer, and most pages' DataLoaders (and Ray) fork workers
        # while the reader's threads run: the fork this build cannot do safely
        # (see tests/conftest.py). The plain suite runs them, as the README's.
        pytest.skip("the pages' DataLoaders fork workers, which this sanitizer build cannot do safely")
    # Asked for only now, so that a page that skips writes no dataset.
    datasets = request.getfixturevalue("datasets")
    runner = textwrap.dedent(
        r"""
        import json, sys
        page, found = json.load(sys.stdin)
        for line, text in found:
            # Padded so that a traceback's line numbers are the page's.
            exec(compile("\n" * (line - 1) + text, page, "exec"), {"__name__": "__main__"})
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", runner],
        input=json.dumps([page, python]),
        cwd=datasets,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_site_builds_without_a_warning(tmp_path):
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None:
        pytest.skip("the docs extra (mkdocs, mkdocstrings) is not installed")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert os.path.exists(tmp_path / "site" / "api" / "reader" / "index.html")
