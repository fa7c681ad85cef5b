"""`sds-loader bench` measures through what users call: cli/ reads nothing private of the rest.

A bench that reads the reader's insides measures something a user never
runs, and breaks with every refactor of them. So no module under
`sds_loader/cli` touches a private attribute of another object
(`reader._state`, `x._process()`), imports a private name of another
module (`from sds_loader.x import _y`), or imports a private module (`_native`,
but `_version`), checked from the source as the import-direction test checks
imports. A module's own private names (`self._x`, its own `_helper`) are its
business.
"""

from __future__ import annotations

import ast
import pathlib

import sds_loader

CLI = pathlib.Path(sds_loader.__file__).parent / "cli"
#: Private modules the CLI may import: the version string, and the native module for
#: the tools that report on the build itself (native_tools.py).
ALLOWED_MODULES = {"sds_loader._version": "*", "sds_loader._native": "native_tools.py"}


def private_uses(path: pathlib.Path) -> list[str]:
    """`line: what` for each private name of another object or module the file uses."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            owner = node.value
            if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                found.append(f"{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                module = f"{node.module}.{alias.name}"
                private_module = any(_private(part) for part in module.split("."))
                allowed = any(ALLOWED_MODULES.get(name) in ("*", path.name) for name in (module, node.module))
                if private_module and not allowed:
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if (
                    any(_private(part) for part in alias.name.split("."))
                    and alias.name not in ALLOWED_MODULES
                ):
                    found.append(f"{node.lineno}: import {alias.name}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
            name = node.args[1] if len(node.args) > 1 else None
            if isinstance(name, ast.Constant) and isinstance(name.value, str) and _private(name.value):
                found.append(f"{node.lineno}: getattr(..., {name.value!r})")
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_the_cli_reads_nothing_private_of_the_reader_the_dataset_or_the_sources() -> None:
    offences = {
        str(path.relative_to(CLI)): uses for path in sorted(CLI.rglob("*.py")) if (uses := private_uses(path))
    }
    assert not offences, f"cli/ reads private names of other objects or modules: {offences}"


def test_the_check_finds_a_private_read(tmp_path: pathlib.Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from sds_loader import _native\n"
        "from sds_loader.cli.bench.remote import _store_at\n"
        "def f(reader):\n"
        "    return reader._process().table, getattr(reader, '_addressing'), reader.stats.__class__\n",
        encoding="utf-8",
    )
    assert sorted(private_uses(probe)) == [
        "1: from sds_loader import _native",
        "2: from sds_loader.cli.bench.remote import _store_at",
        "4: ._process",
        "4: getattr(..., '_addressing')",
    ]
