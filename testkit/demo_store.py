"""A store formed the way ``make demo`` forms it: the bundled sample replayed through the real
tasks (offline LLM, hashing embedder) into a SQLite file. Formed once per test process and
then only read, by the commands and servers under test, from their own processes.

    from testkit.demo_store import formed_demo_store
    path = formed_demo_store(tmp_path_factory)   # Path of the SQLite file

The sample's agent is ``agent-juniper``; ``user-maya`` and ``user-leo`` are among its people.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from testkit.procs import REPO_ROOT

AGENT = "agent-juniper"
MAYA = "user-maya"
_formed: dict[str, Path] = {}


def demo_env(**extra: str) -> dict[str, str]:
    """The environment a user would have: no provider key, no stray ``MEMORY_*`` setting, the
    hashing embedder (the tests' embedder, as in tests/ops/test_demo.py)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MEMORY_", "OTEL_")) and k not in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")}
    env.update({"MEMORY_EMBEDDING_PROVIDER": "hashing", "PYTHONPATH": str(REPO_ROOT)})
    env.update(extra)
    return env


def formed_demo_store(tmp_path_factory) -> Path:
    """The path of a SQLite store formed by ``python -m ops.demo`` (run once per process)."""
    if "path" not in _formed:
        folder = tmp_path_factory.mktemp("demo-store")
        db = folder / "demo.db"
        result = subprocess.run([sys.executable, "-m", "ops.demo", "--db", str(db)], cwd=folder, env=demo_env(),
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-4000:]
        assert "warning: sessions still forming" not in result.stdout, result.stdout[-2000:]
        _formed["path"] = db
    return _formed["path"]
