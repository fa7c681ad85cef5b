"""No module of the package reads another's private names.

A layer that reads `reader._process()` or `getattr(dataset, "_addressing")`
breaks the day that member is renamed, and hides what it depends on; what
the layers over the reader need of a dataset is public and typed instead
(`sds_loader.dataset_protocol`). Checked from the source, as the import
directions are (test_import_paths.py): every ``x._name`` and every
``getattr(x, "_name")`` of every module, where ``x`` is not ``self``,
``cls`` or ``super()``, must name something the module itself defines (its
functions, classes, class attributes and ``self.`` attributes: a module's
own functions may read its own classes' state). Dunders and ``_native``
(the extension module) are public in all but spelling.
"""

from __future__ import annotations

import ast
import pathlib

import sds_loader

PACKAGE = pathlib.Path(sds_loader.__file__).parent

#: Private names of other libraries that have no public way to the same thing,
#: by the module of ours that reads them. Each is pinned to the versions the
#: package requires, and its use is guarded where the library may change it.
THIRD_PARTY: dict[str, set[str]] = {
    # signal_dataset: the open dataset's index and manifest (its own `locate`
    # reads them; the manifest pages and their layout have no public accessor).
    "dataset.py": {"_index", "_manifest"},
    "manifest_pages.py": {"_index"},
    # signal_dataset: a published view's annotation specification.
    "annotations.py": {"_specification"},
    # signal_dataset's S3 and GCS stores: the client they wrap, and the GCS
    # store's error predicates, so that our sources reuse the client's settings.
    "storage/sources.py": {"_client"},
    "storage/stores.py": {"_client"},
    "storage/gcs_source.py": {"_client"},
    "storage/gcs_stores.py": {"_client", "_credentials", "_precondition_failed", "_api_error"},
    # botocore: the signer's credentials, to sign our own ranged GETs alike.
    "storage/s3_client.py": {"_request_signer", "_credentials"},
    # Ray: which pass over the dataset an execution is (its epoch).
    "ray/datasource.py": {"_execution_idx"},
    # torch: shared-memory storage, and whether the profiler records.
    "torch/buffers.py": {"_new_shared"},
    "torch/ring.py": {"_new_shared"},
    "torch/profiling.py": {"_profiler_enabled"},
}

#: Spelled private, public in fact.
ALWAYS = {"_native"}


def defined_names(tree: ast.Module) -> set[str]:
    """Every name a module defines: functions, classes, class attributes, `self.` attributes."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            names.add(node.attr)
        if isinstance(node, ast.ClassDef):
            for statement in node.body:
                if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                    names.add(statement.target.id)
                elif isinstance(statement, ast.Assign):
                    for target in statement.targets:
                        if isinstance(target, ast.Name):
                            names.add(target.id)
                    if any(isinstance(t, ast.Name) and t.id == "__slots__" for t in statement.targets):
                        if isinstance(statement.value, ast.Tuple | ast.List):
                            names |= {e.value for e in statement.value.elts if isinstance(e, ast.Constant)}
    return names


def private_reads(source: str, allowed: set[str] = frozenset()) -> list[str]:
    """``line: expression`` for each read of a private name of something not the module's own."""
    tree = ast.parse(source)
    own = defined_names(tree) | ALWAYS | set(allowed)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            name, owner = node.attr, node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr", "setattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            name, owner = node.args[1].value, node.args[0]
        else:
            continue
        if not name.startswith("_") or (name.startswith("__") and name.endswith("__")) or name in own:
            continue
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            continue
        if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
            continue
        found.append(f"{node.lineno}: {ast.unparse(owner)}.{name}")
    return found


def test_no_module_reads_another_modules_private_names():
    offences = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        found = private_reads(path.read_text(encoding="utf-8"), THIRD_PARTY.get(relative, set()))
        if found:
            offences[relative] = found
    assert not offences, (
        f"private names read from outside the module that defines them: {offences}; "
        "use or add a public member (sds_loader.dataset_protocol for what a dataset offers)"
    )


def test_every_allowance_is_still_needed():
    # An allowance the module no longer needs would let a new private read through unseen.
    for relative, names in THIRD_PARTY.items():
        source = (PACKAGE / relative).read_text(encoding="utf-8")
        needed = {line.rsplit(".", 1)[1] for line in private_reads(source)}
        assert names <= needed, f"{relative}: {sorted(names - needed)} allowed and no longer read"


def test_the_check_finds_what_it_is_for():
    found = private_reads(
        "class Reader:\n"
        "    def __init__(self):\n"
        "        self._lock = None\n"
        "    def _own(self):\n"
        "        return self._other, super()._base()\n"
        "def fresh(reader):\n"
        "    reader._lock = 1\n"
        "    return reader._own(), reader._process(), getattr(reader, '_addressing'), x.__dict__\n"
    )
    assert sorted(found) == ["8: reader._addressing", "8: reader._process"]
    assert private_reads("import m\nm._native.f()\nm._secret\n") == ["3: m._secret"]
