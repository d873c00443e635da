"""Adapters and entrypoints use other packages through their public API only: no attribute whose name starts with
an underscore is read on anything but ``self``, ``cls`` or an object of the module's own making, and nothing is
imported from an underscored module or name of another package. A private name can change in any release of a
library; what a library documents cannot without notice."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ("adapters", "entrypoints")
OURS = {"domain", "application", "adapters", "entrypoints"}

# underscored names a library documents as its public API (a Row's columns could shadow plain names)
DOCUMENTED = {
    "_mapping", "_asdict", "_fields", "_t", "_tuple",  # sqlalchemy.engine.Row
    "_replace", "_make",  # collections.namedtuple
}


def _own_names(tree: ast.Module) -> set[str]:
    """Underscored names the module defines itself: its functions, classes and their attributes."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if n.startswith("_")}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__")) and name not in DOCUMENTED


def violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    own = _own_names(tree)
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            if isinstance(base, ast.Call) and ast.unparse(base.func) == "super":
                # a base class's private method, even when overridden here (a library's subclass)
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
            elif node.attr not in own and not (isinstance(base, ast.Name) and base.id in ("self", "cls")):
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
                "getattr", "setattr", "hasattr", "delattr") and len(node.args) > 1:
            name = node.args[1]
            if isinstance(name, ast.Constant) and isinstance(name.value, str) and _private(name.value) \
                    and name.value not in own:
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[0] in OURS or parts[0] == "__future__":
                continue
            if any(_private(p) for p in parts) or any(_private(a.name) for a in node.names):
                found.append(f"{where}:{node.lineno}: from {node.module} import "
                             f"{', '.join(a.name for a in node.names)}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] not in OURS and any(_private(p) for p in parts):
                    found.append(f"{where}:{node.lineno}: import {alias.name}")
    return found


@pytest.mark.slow
def test_adapters_and_entrypoints_touch_no_private_name_of_another_package() -> None:
    found = [line for folder in CHECKED for path in sorted((ROOT / folder).rglob("*.py")) for line in violations(path)]
    assert not found, "private names of other packages used:\n" + "\n".join(found)


def test_the_check_sees_what_it_looks_for(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from litestar._openapi.plugin import OpenAPIPlugin\n"
        "import sqlalchemy._private\n"
        "class Mine:\n"
        "    def __init__(self, conn):\n"
        "        self._conn = conn\n"
        "    def run(self, other):\n"
        "        other._conn.close()\n"  # the module's own attribute: allowed
        "        row = other._mapping\n"  # documented by SQLAlchemy: allowed
        "        getattr(other, '_queue_class')\n"
        "        super()._do_return_conn(other)\n"
        "        return self._conn._connection._execute\n")
    assert sorted(line.split(": ", 1)[1] for line in violations(sample)) == [
        "from litestar._openapi.plugin import OpenAPIPlugin",
        "getattr(other, '_queue_class')",
        "import sqlalchemy._private",
        "self._conn._connection",
        "self._conn._connection._execute",
        "super()._do_return_conn",
    ]
