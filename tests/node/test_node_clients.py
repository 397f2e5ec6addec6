"""Clients nobody here wrote (issue 23): ``clients.test.mjs`` runs under Node's own test runner,
calling the HTTP API with ``fetch`` and the MCP server with the official TypeScript MCP SDK
(pinned in package.json / package-lock.json, installed with ``npm ci`` into a cache folder),
against a real uvicorn and a real ``memoryctl mcp``. Without node the test is skipped on a
laptop and fails in CI (``make test`` installs node and npm as root)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.api_server import demo_api
from testkit.demo_store import AGENT
from testkit.procs import REPO_ROOT

HERE = Path(__file__).resolve().parent
CACHE = REPO_ROOT / ".runtime" / "node-clients"


def _missing(what: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{what} is required in CI (env CI is set); make test installs it (apt-get install nodejs npm)")
    pytest.skip(f"{what} is not installed; the Node client tests are skipped (they run in CI)")


@pytest.fixture(scope="module")
def node_project() -> Path:
    """A folder holding the pinned packages (``npm ci``, once per lock file) and the test script."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            _missing(tool)
    lock = (HERE / "package-lock.json").read_bytes()
    folder = CACHE / hashlib.sha256(lock + (HERE / "package.json").read_bytes()).hexdigest()[:16]
    stamp = folder / ".installed"
    if not stamp.exists():
        folder.mkdir(parents=True, exist_ok=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copy(HERE / name, folder / name)
        done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=folder,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"npm ci failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        stamp.touch()
    shutil.copy(HERE / "clients.test.mjs", folder / "clients.test.mjs")
    return folder


def test_node_fetch_and_the_typescript_mcp_sdk_reach_what_their_credentials_allow(node_project, tmp_path_factory):
    with demo_api(tmp_path_factory) as server:
        env = {
            "PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/root"),
            "MEMORY_TEST_URL": server.url, "MEMORY_TEST_AGENT": AGENT,
            "MEMORY_TEST_AGENT_KEY": server.agent_key(AGENT),
            "MEMORY_TEST_TOM_TOKEN": server.user_token(AGENT, "user-tom"),
            "MEMORY_TEST_MEMORYCTL": str(Path(sys.executable).parent / "memoryctl"),
            "MEMORY_TEST_STORE_URL": server.store_url,
        }
        run = subprocess.run(["node", "--test", "--test-reporter=tap", "clients.test.mjs"], cwd=node_project,
                             env=env, capture_output=True, text=True, timeout=300)
    report = run.stdout + run.stderr
    assert run.returncode == 0, report[-6000:]
    assert "# pass 5" in report and "# fail 0" in report, report[-3000:]
