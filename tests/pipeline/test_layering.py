"""``pipeline/`` is the domain: it imports nothing of Celery, of the workers, of ops or of the HTTP API."""

import ast
from pathlib import Path

import pytest

PIPELINE = Path(__file__).resolve().parents[2] / "pipeline"
FORBIDDEN = ("workers", "ops", "api", "fastapi", "celery", "kombu", "flower", "bench", "tests")


def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


@pytest.mark.parametrize("path", sorted(PIPELINE.rglob("*.py")), ids=lambda p: str(p.relative_to(PIPELINE)))
def test_a_pipeline_module_imports_no_worker_ops_or_celery_code(path):
    wrong = [
        f"{path.relative_to(PIPELINE.parent)}:{line} imports {name}"
        for line, name in _imports(path) if name.split(".")[0] in FORBIDDEN
    ]
    assert not wrong, "\n".join(wrong)


def test_the_walk_sees_imports_inside_functions(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from workers.dispatch import send\n")
    assert _imports(module) == [(2, "workers.dispatch")]
