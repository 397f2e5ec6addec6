"""The checkout's folders import in one direction: the product (``schemas``, ``pipeline``,
``usecases``, ``workers``, ``ops``, ``api``) imports none of the rest; ``pipeline/``, the domain,
imports nothing of Celery, of the use cases or of a door; ``usecases/``, the application layer,
nothing of Celery or of a door; the doors (``api/``, ``ops/``, ``workers/``) never import each
other, save the modules named in ``CROSSINGS`` with their reason; ``testkit/``, the harness
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

#: the doors: the HTTP API with MCP and the inspector, memoryctl, the Celery workers. Each
#: reaches the application through ``usecases/`` and the domain, never through another door.
DOORS = ("api", "ops", "workers")
#: the only modules that import another door: (what they import, why). A composition root
#: starts or assembles a door; a broker client sends to Celery, whose code lives only in
#: ``workers/`` (design §2), so memoryctl reaches the broker through the workers' client.
CROSSINGS = {
    # composition roots
    "ops/commands/serve.py": (("api.app", "api.limits", "api.serving"),
                              "memoryctl serve (and serve --openapi) builds the HTTP API and runs it"),
    "ops/commands/ui.py": (("api.ui.serve",), "memoryctl ui starts the inspector"),
    "ops/commands/mcp.py": (("api.identity", "api.mcp", "workers.client"),
                            "memoryctl mcp runs the MCP server over stdio, its service publishing to the broker"),
    "ops/demo.py": (("workers.deps", "workers.in_process", "workers.producer"),
                    "memoryctl demo runs the formation workers in process and publishes to them"),
    "api/app.py": (("workers.client", "workers.deps", "workers.dispatch"),
                   "create_app assembles the API: the workers' clients, the service publishing to the broker, "
                   "the sender of jobs and runs"),
    "api/ui/serve.py": (("ops.stores", "workers.in_process"),
                        "memoryctl ui's process: the store as the CLI opens it, and with --worker a worker in process"),
    # broker clients
    "ops/broker.py": (("workers.producer",), "checks the broker answers before a command sends to it"),
    "ops/commands/publish.py": (("workers.producer",), "memoryctl publish and end-session publish events"),
    "ops/replay.py": (("workers.producer",), "memoryctl replay-rejected validates events as the producer does"),
    "ops/commands/runs.py": (("workers.dispatch",), "replay-failed and resume --backfill send a run's first stage"),
    "ops/commands/curate.py": (("workers.deps",), "memoryctl curate needs the workers' clients (embedder, LLM) "
                                                  "over the existing store"),
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


def _door_crossings() -> dict[str, list[tuple[int, str]]]:
    found: dict[str, list[tuple[int, str]]] = {}
    for door in DOORS:
        for path in modules(door):
            for line, name in imported(path):
                if name.split(".")[0] in DOORS and name.split(".")[0] != door:
                    found.setdefault(path.relative_to(ROOT).as_posix(), []).append((line, name))
    return found


def test_no_door_imports_another_door_save_the_named_crossings():
    """``api/`` imports neither ``ops`` nor ``workers``, ``ops/`` neither ``api`` nor
    ``workers``, ``workers/`` neither ``api`` nor ``ops``, inside functions too, save what
    ``CROSSINGS`` names; a use case two doors need lives in ``usecases/``."""
    wrong = [f"{module}:{line} imports {name}"
             for module, found in _door_crossings().items() for line, name in found
             if name not in CROSSINGS.get(module, ((), ""))[0]]
    assert not wrong, "\n".join(wrong)


def test_every_named_crossing_is_still_made():
    """An exception no longer needed goes, so the list only shrinks."""
    made = {module: {name for _, name in found} for module, found in _door_crossings().items()}
    stale = [f"{module}: {name}" for module, (names, _) in CROSSINGS.items() for name in names
             if name not in made.get(module, set())]
    assert not stale, "\n".join(stale)


def test_the_check_sees_imports_inside_functions_and_by_name(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import importlib\n\ndef f():\n    from bench.search import main\n"
                      "    importlib.import_module('bench.ann')\n    __import__('tests.support')\n")
    assert sorted(imported(module)) == [(1, "importlib"), (4, "bench.search"), (5, "bench.ann"), (6, "tests.support")]


def test_running_a_bench_as_a_command_is_not_an_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import subprocess, sys\nsubprocess.run([sys.executable, '-m', 'bench.ann'])\n")
    assert [name for _, name in imported(module)] == ["subprocess", "sys"]
