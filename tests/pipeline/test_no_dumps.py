"""``Store.dump_all`` reads every document of the store: tests and audits may call it, no
production path may (design §11 "Provenance and erasure": per-user operations read only what
rests on the user)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = ("pipeline", "workers", "ops", "api")


def _calls(path: Path, name: str) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == name)
                or (isinstance(node.func, ast.Name) and node.func.id == name)
                or (isinstance(node.func, ast.Name) and node.func.id == "getattr" and len(node.args) > 1
                    and isinstance(node.args[1], ast.Constant) and node.args[1].value == name))]


def test_no_production_module_calls_dump_all():
    found = [f"{path.relative_to(ROOT)}:{line}" for package in PRODUCTION
             for path in sorted((ROOT / package).rglob("*.py")) for line in _calls(path, "dump_all")]
    assert found == [], "production code reads the whole store: " + ", ".join(found)


def test_the_check_sees_a_call(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("def f(store):\n    return store.dump_all()\n", encoding="utf-8")
    assert _calls(sample, "dump_all") == [2]
