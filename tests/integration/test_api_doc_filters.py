"""docs/api.md's Python example of a filtered search runs as written on the demo's store, with
the command the page gives beside it, and prints the agent's finance facts only."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from testkit.demo_store import demo_env, formed_demo_store
from testkit.procs import REPO_ROOT


def _section() -> str:
    page = (REPO_ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    return page.split("\n### In Python\n", 1)[1].split("\n### ", 1)[0]


def test_the_python_filter_example_prints_the_finance_facts_of_the_demo(tmp_path_factory, tmp_path):
    block = re.search(r"```python\n(.*?)```", _section(), re.S).group(1)
    words = shlex.split(re.search(r"```sh\n(.*?)\n```", _section(), re.S).group(1))
    settings = dict(w.split("=", 1) for w in words if re.match(r"^[A-Z_]+=", w))
    argv = [w for w in words if not re.match(r"^[A-Z_]+=", w)]
    formed = formed_demo_store(tmp_path_factory)
    (tmp_path / ".runtime").mkdir()
    for suffix in ("", "-wal"):
        if Path(f"{formed}{suffix}").exists():
            shutil.copy(f"{formed}{suffix}", tmp_path / ".runtime" / f"demo.db{suffix}")
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    (tmp_path / argv[-1]).write_text(block, encoding="utf-8")

    done = subprocess.run(argv, cwd=tmp_path, env=demo_env(**settings), capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert lines and all(re.match(r"^\[.*'finance'.*\] ", line) for line in lines), done.stdout
    assert any("12,000 euros" in line for line in lines), done.stdout
