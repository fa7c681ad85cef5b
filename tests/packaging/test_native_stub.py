"""src/sds_loader/_native.pyi describes the extension csrc/python/ builds.

The stub is read as text (ast), never imported, and compared with the built
module: the same public functions and classes, each class with the same
methods and properties (read-only or not), and each function and method with
the same parameter names and defaults as pybind11 reports in its signature.
A name added to, renamed in or dropped from the binding without the stub
fails here, saying which.
"""

from __future__ import annotations

import ast
import os
import re

import pytest
from repo_paths import REPO

_native = pytest.importorskip("sds_loader._native", reason="the native extension is not built")

STUB = os.path.join(REPO, "src", "sds_loader", "_native.pyi")


def public(name: str) -> bool:
    return not name.startswith("_")


def stub_tree() -> ast.Module:
    with open(STUB, encoding="utf-8") as handle:
        return ast.parse(handle.read(), STUB)


def decorators(node: ast.FunctionDef) -> set[str]:
    names = set()
    for decorator in node.decorator_list:
        if isinstance(decorator, ast.Name):
            names.add(decorator.id)
        elif isinstance(decorator, ast.Attribute):
            names.add(decorator.attr)  # @work_per_helper.setter
    return names


def stub_parameters(node: ast.FunctionDef) -> list[tuple[str, str | None]]:
    """(name, default as Python would repr it, or None) of each parameter but self."""
    arguments = node.args
    ordered = [*arguments.posonlyargs, *arguments.args]
    defaults: list[ast.expr | None] = [None] * (len(ordered) - len(arguments.defaults)) + list(
        arguments.defaults
    )
    found = [
        (argument.arg, None if default is None else repr(ast.literal_eval(default)))
        for argument, default in zip(ordered, defaults, strict=True)
    ]
    found += [
        (argument.arg, None if default is None else repr(ast.literal_eval(default)))
        for argument, default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
    ]
    return [item for item in found if item[0] != "self"]


def split_top_level(text: str) -> list[str]:
    """`text` cut at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for at, char in enumerate(text):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:at])
            start = at + 1
    if text[start:].strip():
        parts.append(text[start:])
    return [part.strip() for part in parts]


def runtime_parameters(function: object, name: str) -> list[tuple[str, str | None]]:
    """(name, default text, or None) of each parameter but self, from pybind11's signature line."""
    doc = getattr(function, "__doc__", None) or ""
    first = doc.lstrip().splitlines()[0] if doc.strip() else ""
    match = re.match(rf"{re.escape(name)}\((.*)\) -> .*$", first)
    assert match, f"no pybind11 signature for {name}: {first!r}"
    found = []
    for part in split_top_level(match.group(1)):
        depth, default = 0, None
        for at, char in enumerate(part):
            depth += char in "([{"
            depth -= char in ")]}"
            if char == "=" and depth == 0:
                default = part[at + 1 :].strip()
                part = part[:at]
                break
        found.append((part.split(":")[0].strip(), default))
    return [item for item in found if item[0] != "self"]


def stub_module() -> tuple[dict[str, ast.FunctionDef], dict[str, ast.ClassDef]]:
    functions, classes = {}, {}
    for node in stub_tree().body:
        if isinstance(node, ast.FunctionDef) and public(node.name):
            functions[node.name] = node
        elif isinstance(node, ast.ClassDef) and public(node.name):
            classes[node.name] = node
    return functions, classes


def runtime_module() -> tuple[dict[str, object], dict[str, type]]:
    functions, classes = {}, {}
    for name in dir(_native):
        value = getattr(_native, name)
        if not public(name):
            continue
        if isinstance(value, type):
            classes[name] = value
        elif callable(value):
            functions[name] = value
    return functions, classes


def test_the_stub_has_the_modules_functions_and_classes():
    stub_functions, stub_classes = stub_module()
    functions, classes = runtime_module()
    assert sorted(stub_functions) == sorted(functions), (
        f"functions only in the stub: {sorted(set(stub_functions) - set(functions))}; "
        f"only in the module: {sorted(set(functions) - set(stub_functions))}"
    )
    assert sorted(stub_classes) == sorted(classes), (
        f"classes only in the stub: {sorted(set(stub_classes) - set(classes))}; "
        f"only in the module: {sorted(set(classes) - set(stub_classes))}"
    )


def test_each_class_has_the_same_methods_and_properties():
    _, stub_classes = stub_module()
    _, classes = runtime_module()
    for class_name in sorted(set(stub_classes) & set(classes)):
        stub_methods, stub_properties = set(), {}
        for node in stub_classes[class_name].body:
            if not isinstance(node, ast.FunctionDef) or not public(node.name):
                continue
            kinds = decorators(node)
            if "property" in kinds:
                stub_properties.setdefault(node.name, False)
            elif "setter" in kinds:
                stub_properties[node.name] = True
            else:
                stub_methods.add(node.name)
        methods, properties = set(), {}
        for name, value in vars(classes[class_name]).items():
            if not public(name):
                continue
            if isinstance(value, property):
                properties[name] = value.fset is not None
            elif callable(value):
                methods.add(name)
        assert sorted(stub_methods) == sorted(methods), (
            f"{class_name}: methods only in the stub: {sorted(stub_methods - methods)}; "
            f"only in the module: {sorted(methods - stub_methods)}"
        )
        assert stub_properties == properties, (
            f"{class_name}: properties (name: writable) in the stub {stub_properties}, "
            f"in the module {properties}"
        )


def test_each_function_and_method_takes_the_same_parameters():
    stub_functions, stub_classes = stub_module()
    functions, classes = runtime_module()
    pairs = [
        (name, stub_functions[name], functions[name]) for name in sorted(set(stub_functions) & set(functions))
    ]
    for class_name in sorted(set(stub_classes) & set(classes)):
        for node in stub_classes[class_name].body:
            if isinstance(node, ast.FunctionDef) and (public(node.name) or node.name == "__init__"):
                if decorators(node) & {"property", "setter"}:
                    continue
                runtime = getattr(classes[class_name], node.name, None)
                if runtime is not None:
                    pairs.append((f"{class_name}.{node.name}", node, runtime))
    assert pairs
    for label, node, runtime in pairs:
        name = label.rsplit(".", 1)[-1]
        assert stub_parameters(node) == runtime_parameters(runtime, name), (
            f"{label}: the stub's parameters (name, default) {stub_parameters(node)} differ from "
            f"the module's {runtime_parameters(runtime, name)}"
        )
