"""The checkout's folders import in one direction: the product (``schemas``, ``pipeline``,
``workers``, ``ops``, ``api``) imports none of the rest; ``pipeline/``, the domain, imports
nothing of Celery, of the workers, of ops or of the HTTP API either; ``testkit/``, the harness
shared by the tests and the benchmarks, imports neither of them; and ``tests/`` and ``bench/``
never import each other (a test runs a bench as a user does, ``python -m bench.<name>``;
``testkit.benches``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("schemas", "pipeline", "usecases", "workers", "ops", "api")
# folder -> the top-level packages no module in it may import
FORBIDDEN = {
    **{name: ("tests", "bench", "testkit") for name in PRODUCT},
    "pipeline": ("tests", "bench", "testkit", "usecases", "workers", "ops", "api", "fastapi", "celery", "kombu", "flower"),
    "usecases": ("tests", "bench", "testkit", "workers", "ops", "api", "fastapi", "celery", "kombu", "flower"),
    "testkit": ("tests", "bench"),
    "bench": ("tests",),
    "tests": ("bench",),
}


def imported(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every absolute import in ``path``, inside functions too, and of every
    ``importlib.import_module("...")`` or ``__import__("...")`` with a literal name."""
    found = []
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and getattr(node.func, "attr", getattr(node.func, "id", None)) in ("import_module", "__import__")):
            found.append((node.lineno, node.args[0].value))
    return found


def modules(folder: str) -> list[Path]:
    return sorted(p for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("folder", sorted(FORBIDDEN))
def test_a_folder_imports_nothing_it_must_not(folder):
    assert modules(folder), f"{folder}/ has no modules: the check would pass on nothing"
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in modules(folder)
        for line, name in imported(path)
        if name.split(".")[0] in FORBIDDEN[folder]
    ]
    assert not wrong, "\n".join(wrong)


def test_the_check_sees_imports_inside_functions_and_by_name(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import importlib\n\ndef f():\n    from bench.search import main\n"
                      "    importlib.import_module('bench.ann')\n    __import__('tests.support')\n")
    assert sorted(imported(module)) == [(1, "importlib"), (4, "bench.search"), (5, "bench.ann"), (6, "tests.support")]


def test_running_a_bench_as_a_command_is_not_an_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import subprocess, sys\nsubprocess.run([sys.executable, '-m', 'bench.ann'])\n")
    assert [name for _, name in imported(module)] == ["subprocess", "sys"]
