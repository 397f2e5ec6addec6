"""The installable wheel holds the product and nothing else: ``schemas``, ``pipeline``,
``workers``, ``ops`` (``memoryctl`` and the operator code), ``api`` (the HTTP app) and
``beat_schedule``. The benchmarks
(``bench/``) and the test scaffolding (``tests/``: harnesses that SIGKILL workers, throwaway
servers) stay in the checkout.

The wheel is built as ``pip install .`` and the Dockerfile build it: pip's isolated build, which
fetches the build backend the project pins (``setuptools>=77``, newer than a fresh venv's), from
a copy of the checkout so the build leaves no ``build/`` or ``*.egg-info`` behind in it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("schemas", "pipeline", "usecases", "workers", "ops", "api")
# what a checkout holds that never reaches a build (.gitignore's own list, and the checkout's VCS)
NOT_SOURCE = (".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".runtime",
              ".pytest_cache", ".hypothesis", "*.db", "*.db-wal", "*.db-shm")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    work = tmp_path_factory.mktemp("wheel")
    source = work / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(work / "dist"), str(source)],
        capture_output=True, text=True, timeout=240,
    )
    assert done.returncode == 0, f"pip wheel failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    (built,) = (work / "dist").glob("memory_pipeline-*.whl")
    with zipfile.ZipFile(built) as archive:
        yield archive


def test_the_wheel_ships_exactly_the_product_packages(wheel):
    names = wheel.namelist()
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top == {*PACKAGES, "beat_schedule.py"}
    assert [n for n in names if "bench" in n.split("/")[:-1] or n.startswith(("tests/", "testkit/"))] == []


def test_it_holds_every_module_and_data_file_of_the_product_and_no_other(wheel):
    shipped = {n for n in wheel.namelist() if n.split("/")[0] in PACKAGES}
    wanted = {
        path.relative_to(ROOT).as_posix()
        for package in PACKAGES
        for path in (ROOT / package).rglob("*")
        if path.suffix in (".py", ".jsonl", ".json", ".txt", ".html", ".css", ".js") and "__pycache__" not in path.parts
    }
    assert "ops/demo_data/launch_planning.jsonl" in wanted
    assert {"api/ui/templates/base.html", "api/ui/static/htmx.min.js", "api/ui/static/htmx.LICENSE.txt"} <= wanted
    assert shipped == wanted, (sorted(wanted - shipped), sorted(shipped - wanted))


def test_memoryctl_is_the_installed_command(wheel):
    (entry_points,) = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    assert "memoryctl = ops.cli:main" in wheel.read(entry_points).decode()
