"""No import cycle inside ``pipeline.store`` (design §7): each module of the store can be
imported, read and tested on its own, in any order. A cycle works only while every module on it
is imported from the right end, and an import placed inside a function to dodge it still ties
the modules together; both are found here, from the source (``ast``), without importing it.
Imports under ``if TYPE_CHECKING:`` never run and are left out."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = "pipeline.store"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in (ROOT / "pipeline" / "store").rglob("*.py")}


def _runtime_nodes(tree: ast.AST):
    """Every node, without the bodies of ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                stack.extend(child.orelse)
                continue
            stack.append(child)


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The store modules ``name`` imports, at its top or inside a function."""
    found = set()
    is_package = path.name == "__init__.py"
    for node in _runtime_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return {m for m in found if m in modules and m != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected group of modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_the_store_packages_have_no_import_cycle():
    modules = _modules()
    # a module's import of its own package is left out: Python runs the package before the
    # module whatever the module imports, so that edge says nothing of the module's own imports
    graph = {name: {m for m in imports_of(name, path, modules) if not name.startswith(f"{m}.")}
             for name, path in modules.items()}
    assert cycles(graph) == []


def test_a_cycle_through_an_import_inside_a_function_is_found(tmp_path):
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from pipeline.store.sqlite import schema\n")
    assert imports_of("pipeline.store.sqlite.db", source, _modules()) >= {"pipeline.store.sqlite.schema"}
