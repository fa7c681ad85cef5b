"""Module paths that moved are gone, and the package's imports run one way.

The package is laid out by job: the reader's own modules at the root,
`storage/` for byte sources (importing nothing of the rest), `torch/` and
`ray/` over the reader, `samplers/` seeing datasets only through protocols,
and `cli/` on top. An import circle, or a storage module reaching up into the
reader, is what that layout exists to prevent, so both are checked here from
the source: every import of every module, the ones inside functions
included, since a function-local import is how a circle usually hides.
"""

from __future__ import annotations

import ast
import importlib
import pathlib

import pytest
from repo_paths import REPO

import sds_loader

PACKAGE = pathlib.Path(sds_loader.__file__).parent
REPO_BENCHMARKS = pathlib.Path(REPO) / "benchmarks"

#: Where the modules of earlier releases went.
MOVED = {
    # 0.3: the flat package root split into torch/ and storage/.
    "sds_loader.torch_buffers": "sds_loader.torch.buffers",
    "sds_loader.torch_ring": "sds_loader.torch.ring",
    "sds_loader.torch_mixture": "sds_loader.torch.mixture",
    "sds_loader.stores": "sds_loader.storage.stores",
    "sds_loader.s3_source": "sds_loader.storage.s3_source",
    "sds_loader.sources": "sds_loader.storage.sources",
    "sds_loader.remote_readahead": "sds_loader.storage.remote_readahead",
    # Then the package by job.
    "sds_loader.addressing": "sds_loader.dataset",
    "sds_loader.dataset_root": "sds_loader.dataset",
    "sds_loader.reference_shards": "sds_loader.dataset",
    "sds_loader.record_metadata": "sds_loader.metadata",
    "sds_loader.labels": "sds_loader.metadata",
    "sds_loader.dtypes": "sds_loader.schema",
    "sds_loader.outputs": "sds_loader.schema",
    "sds_loader.storage.fallback": "sds_loader.fallback",
    "sds_loader.storage.fallback_helper": "sds_loader.fallback_helper",
    "sds_loader.storage.helper_protocol": "sds_loader.fallback_protocol",
    "sds_loader.native_tools": "sds_loader.cli.native_tools",
    "sds_loader.synthetic": "sds_loader.cli.synthetic",
    "sds_loader.synthetic_bursts": "sds_loader.cli.synthetic_bursts",
    "sds_loader.dataset_shards": "sds_loader.cli.dataset_shards",
    "sds_loader.shared_epoch": "sds_loader.torch.shared_epoch",
    # 0.4: one name, one thing (node_cache is the native cache, Mixture the dataset).
    "sds_loader.storage.node_cache": "sds_loader.storage.cache_settings",
    "sds_loader.cli.bench.node_cache": "sds_loader.cli.bench.cache_epochs",
    "sds_loader.cli.bench.mixture": "sds_loader.cli.bench.mixture_cost",
    "sds_loader.samplers.mixture": "sds_loader.samplers.mixture_sampler",
}

#: Simulation tools that left the installed package for benchmarks/ (0.4).
LEFT = {
    "sds_loader.cli.bench.proxy": "shaping_proxy.py",
    "sds_loader.cli.bench.counting_proxy": "shaping_proxy.py",
    "sds_loader.cli.bench.shaping_proxy": "shaping_proxy.py",
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_is_gone_and_the_new_one_imports(old: str) -> None:
    if MOVED[old].startswith(("sds_loader.torch", "sds_loader.samplers")):
        import torch_required  # noqa: F401 - skips this case without torch (samplers are torch's)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)
    assert importlib.import_module(MOVED[old]).__name__ == MOVED[old]


@pytest.mark.parametrize("old", sorted(LEFT))
def test_a_simulation_tool_is_not_installed_and_lives_in_benchmarks(old: str) -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)
    assert (REPO_BENCHMARKS / LEFT[old]).is_file()


def module_name(path: pathlib.Path) -> str:
    parts = ["sds_loader", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> dict[str, set[str]]:
    """Each module of the package -> the modules of the package it imports, anywhere in its body."""
    modules = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    known = set(modules) | {"sds_loader._native"}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sds_loader"):
                assert node.level == 0, f"{name}: a relative import"
                targets = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names if alias.name.startswith("sds_loader")]
            for target in targets:
                while target not in known and "." in target:
                    target = target.rsplit(".", 1)[0]
                # `from sds_loader.x import y` names the package `sds_loader.x` too,
                # which a submodule importing a sibling does not depend on.
                if target != name and not name.startswith(target + "."):
                    found.add(target)
        graph[name] = found
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of `graph`, as the modules around it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_package_has_no_import_circle():
    graph = imports()
    assert cycle(graph) is None, " -> ".join(cycle(graph) or [])


def test_a_circle_would_be_found():
    # The check itself, on a circle through a function-local import's kind of edge.
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_storage_imports_nothing_above_it():
    for name, targets in imports().items():
        if name.startswith("sds_loader.storage"):
            above = sorted(
                t for t in targets if not t.startswith("sds_loader.storage") and t != "sds_loader._native"
            )
            assert not above, f"{name} imports {above}: byte sources import nothing of the reader"


def test_samplers_never_import_the_datasets_they_sample():
    for name, targets in imports().items():
        if name.startswith("sds_loader.samplers"):
            dataset_modules = sorted(
                t for t in targets if t.startswith(("sds_loader.torch", "sds_loader.ray"))
            )
            assert not dataset_modules, f"{name} imports {dataset_modules}"


def test_no_module_hides_an_import_below_its_code():
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "noqa: E402" not in text, f"{path.relative_to(PACKAGE)}: an import below the code"
