"""The MCP client config blocks of docs/mcp.md work as written: the stdio block's command and args,
started by the SDK's client with the block's environment (only the store path is this machine's),
and the HTTP block's URL and headers (only the port and key are this server's)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from mcp import StdioServerParameters

from tests.mcp.client import run_http, run_stdio
from testkit.demo_store import AGENT, demo_env
from testkit.procs import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "mcp.md"


def _blocks() -> tuple[dict, dict]:
    section = PAGE.read_text().split("## Client config", 1)[1].split("\n## ", 1)[0]
    stdio, http = (json.loads(b)["mcpServers"]["memory"] for b in re.findall(r"```json\n(.*?)```", section, re.S))
    return stdio, http


def test_the_stdio_config_block_starts_a_server_that_answers_for_its_user(demo_store_url):
    config, _ = _blocks()
    env = {**config["env"], "MEMORY_STORE_URL": demo_store_url, "MEMORY_EMBEDDING_PROVIDER": "hashing",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    talk = run_stdio(StdioServerParameters(command=config["command"], args=config["args"], env=env), [
        ("search_memory", {"query": "Where does Maya live now?"}),
    ])
    assert any("Porto" in f["content"] for f in talk.answers[0].facts)


def test_print_config_gives_the_same_block_with_absolute_paths(demo_store_url):
    config, _ = _blocks()
    env = demo_env(MEMORY_STORE_URL=demo_store_url, **{k: v for k, v in config["env"].items() if k.startswith("MEMORY_MCP")})
    printed = subprocess.run([str(Path(sys.executable).parent / "memoryctl"), "mcp", "--print-config"], env=env,
                             capture_output=True, text=True, timeout=60)
    assert printed.returncode == 0, printed.stderr
    block = json.loads(printed.stdout)["mcpServers"]["memory"]
    assert set(block["env"]) == set(config["env"]) and block["args"] == config["args"]
    assert Path(block["command"]).is_absolute() and Path(block["command"]).name in ("memoryctl", "python")
    assert block["env"]["MEMORY_STORE_URL"] == demo_store_url


def test_the_http_config_block_reaches_the_named_user(api_server):
    _, config = _blocks()
    url = config["url"].replace("http://127.0.0.1:8080", api_server.url)
    headers = {**config["headers"], "Authorization": f"Bearer {api_server.agent_key(AGENT)}"}
    talk = run_http(url, headers, [("get_memory_context", {})])
    assert "Fridays" in talk.answers[0].text and "press invitation" in talk.answers[0].text
