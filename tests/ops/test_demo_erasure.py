"""forget-user and export-user on the demo store, as an operator runs them: erasing Maya removes
exactly what rests on her, keeps what Tom said in the shared agent memory, and the agent's cost
stays; her export holds what is stored about her, and nothing once she is forgotten."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest

from testkit.demo_store import formed_demo_store
from testkit.procs import REPO_ROOT


def _env(db) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY") and not k.startswith("MEMORY_")}
    env.update({"MEMORY_EMBEDDING_PROVIDER": "hashing", "PYTHONPATH": str(REPO_ROOT),
                "MEMORY_STORE_URL": f"sqlite:///{db}"})
    return env


def _memoryctl(db, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ops.cli", *args], env=_env(db), capture_output=True, text=True,
                          timeout=120)


@pytest.fixture
def demo_db(tmp_path_factory, tmp_path):
    """A copy of the store ``make demo`` forms (formed once per test process and shared with the
    other tests that read it), for one test to change."""
    copy = tmp_path / "demo.db"
    with sqlite3.connect(formed_demo_store(tmp_path_factory)) as source, sqlite3.connect(copy) as target:
        source.backup(target)  # a consistent copy, WAL included, that leaves the shared store as it is
    return copy


def _rows(db, table: str) -> list[dict]:
    with sqlite3.connect(db) as conn:
        return [json.loads(doc) for (doc,) in conn.execute(f"SELECT doc FROM memory2_{table}")]


def _cost(db) -> dict:
    out = _memoryctl(db, "cost", "--agent", "agent-juniper", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["total"]["by_model"].values()
    return {key: sum(r[key] for r in rows) for key in ("calls", "input_tokens", "output_tokens")}


def test_forgetting_maya_keeps_toms_part_of_the_agent_memory_and_the_agents_cost(demo_db):
    agent_blob = lambda: next(b for b in _rows(demo_db, "consolidated") if b["scope_key"] == "agent")  # noqa: E731
    assert "audio, video" in agent_blob()["consolidated_content"]
    toms = [r for r in _rows(demo_db, "reflections") if r["source_user_ids"] == ["user-tom"]]
    assert any("audio, video" in r["content"] for r in toms)
    cost_before = _cost(demo_db)

    out = _memoryctl(demo_db, "forget-user", "--user", "user-maya", "--agent", "agent-juniper", "--verify", "--json")

    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout)
    assert report["traces"] == [] and report["unattributed"] == []
    assert "audio, video" in agent_blob()["consolidated_content"]
    left = _rows(demo_db, "reflections") + _rows(demo_db, "facts")
    assert left and all("user-maya" not in r["source_user_ids"] for r in left)
    assert {r["reflection_id"] for r in toms} <= {r["reflection_id"] for r in _rows(demo_db, "reflections")}
    assert "user-maya" not in json.dumps(_rows(demo_db, "usage"))
    cost_after = _cost(demo_db)
    assert cost_after["input_tokens"] >= cost_before["input_tokens"], (cost_before, cost_after)
    assert cost_after["calls"] >= cost_before["calls"]


def test_export_user_holds_what_is_stored_about_maya_and_nothing_once_she_is_forgotten(demo_db, tmp_path):
    out = tmp_path / "maya.jsonl"
    done = _memoryctl(demo_db, "export-user", "--user", "user-maya", "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert json.loads(done.stdout)["records"] == {k: sum(r["kind"] == k for r in records) for k in {r["kind"] for r in records}}
    kinds = {r["kind"] for r in records}
    assert {"message", "fact", "reflection", "blob", "run_cost"} <= kinds
    assert {r["sender_id"] for r in records if r["kind"] == "message"} == {"user-maya"}
    assert not [r for r in records if "audio, video" in json.dumps(r)]  # Tom's words stay out
    assert any(r["kind"] == "fact" and r["history"] is not None and r["valid_from"] for r in records)

    assert _memoryctl(demo_db, "forget-user", "--user", "user-maya", "--agent", "agent-juniper").returncode == 0
    again = _memoryctl(demo_db, "export-user", "--user", "user-maya")
    assert again.returncode == 0 and again.stdout == ""
    assert "nothing stored about this user" in again.stderr
