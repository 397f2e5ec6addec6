"""No function outside the tests is longer than 60 lines, counted from its ``def`` line to its
last line, docstring included (the STYLE guide: a long function is split into named steps).
Nested functions count on their own and inside their parent. A word list or table may stay
long: it is listed in ``ALLOWED`` with its reason; a function being split elsewhere is listed
in ``PENDING`` with its reason, and the check fails once it is short so the entry goes.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("schemas", "pipeline", "usecases", "workers", "ops", "api", "testkit", "bench")
LIMIT = 60

# "path::qualified name" -> why it may be longer (word lists and tables only)
ALLOWED: dict[str, str] = {}

# "path::qualified name" -> why it is long for now
PENDING: dict[str, str] = {}


def long_functions(path: Path) -> dict[str, int]:
    """Qualified name -> length of every function in ``path`` over ``LIMIT`` lines."""
    found: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                length = child.end_lineno - child.lineno + 1
                if not isinstance(child, ast.ClassDef) and length > LIMIT:
                    found[name] = length
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_bytes(), filename=str(path)), "")
    return found


def every_long_function() -> dict[str, int]:
    found = {}
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "__pycache__" not in path.parts:
                rel = path.relative_to(ROOT).as_posix()
                found.update({f"{rel}::{name}": n for name, n in long_functions(path).items()})
    return found


def test_no_function_outside_the_tests_is_over_sixty_lines():
    found = every_long_function()
    wrong = [f"{key}: {n} lines" for key, n in sorted(found.items()) if key not in ALLOWED and key not in PENDING]
    assert not wrong, f"split into named steps (at most {LIMIT} lines each):\n" + "\n".join(wrong)


def test_every_exception_still_names_a_long_function():
    found = every_long_function()
    stale = [key for key in (*ALLOWED, *PENDING) if key not in found]
    assert not stale, "no longer over the limit (or gone): remove from the lists:\n" + "\n".join(stale)


def test_a_long_function_is_measured_from_def_to_its_last_line(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT - 2))
    source = tmp_path / "sample.py"
    source.write_text(
        f'def short():\n    """Doc."""\n{body}\n\n'
        f'class Holder:\n    @staticmethod\n    def long():\n        """Doc."""\n'
        + "\n".join(f"        y{i} = {i}" for i in range(LIMIT - 1))
        + "\n\n        def inner():\n" + "\n".join(f"            z{i} = {i}" for i in range(LIMIT)) + "\n"
    )
    assert long_functions(source) == {"Holder.long": 2 * LIMIT + 3, "Holder.long.inner": LIMIT + 1}
