"""A bench run the way a user runs it, ``python -m bench.<name> ...`` from the checkout's root,
in a process of its own: the tests check what it prints and how it exits without importing
``bench`` (``tests/`` and ``bench/`` never import each other; ``tests/test_layout.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from testkit.procs import REPO_ROOT


@dataclass(frozen=True)
class BenchRun:
    """How one bench process ended: its exit code and what it wrote."""

    code: int
    out: str
    err: str

    @property
    def figures(self) -> dict:
        """The JSON object on the last line of its output (every bench ends with one)."""
        lines = self.out.strip().splitlines()
        assert self.code == 0 and lines, f"the bench exited with {self.code}:\n{self.err[-3000:]}"
        try:
            return json.loads(lines[-1])
        except json.JSONDecodeError:
            return json.loads(self.out)  # printed indented, over several lines


def run_bench(name: str, *args: str, env: Mapping[str, str] | None = None, path: tuple[Path, ...] = (),
              timeout: float = 300) -> BenchRun:
    """Run ``python -m bench.<name> *args`` with ``env`` over this process's environment and
    ``path`` ahead of the checkout on ``PYTHONPATH`` (a folder of stand-in modules)."""
    environ = {**os.environ, **(env or {})}
    environ["PYTHONPATH"] = os.pathsep.join(str(p) for p in (*path, REPO_ROOT))
    done = subprocess.run([sys.executable, "-m", f"bench.{name}", *args], cwd=REPO_ROOT, env=environ,
                          capture_output=True, text=True, timeout=timeout)
    return BenchRun(done.returncode, done.stdout, done.stderr)
