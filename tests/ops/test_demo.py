"""``make demo`` end to end: the real tasks on an in-process worker, the bundled sample, the
offline LLM and the hashing embedder; every section of the report is printed."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import pytest

from ops.demo import DATA, load_events, sessions_in_order
from testkit.procs import REPO_ROOT


def test_the_bundled_sample_is_a_valid_multi_session_conversation_with_a_group_chat():
    from schemas.events import Rejection, parse_event

    events = load_events(DATA)
    assert not [e for e in events if isinstance(parse_event(e, max_message_bytes=32 * 1024), Rejection)]
    messages = [e for e in events if e["type"] == "message.added"]
    sessions = sessions_in_order(events)
    assert 40 <= len(messages) <= 80
    assert 3 <= len(sessions) <= 4
    assert any(len(evts[0]["session_users"]) > 1 for _, evts in sessions)


def _demo_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")}
    env = {k: v for k, v in env.items() if not k.startswith(("MEMORY_", "OTEL_"))}
    env.update({"MEMORY_EMBEDDING_PROVIDER": "hashing", "PYTHONPATH": str(REPO_ROOT)})
    return env


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    """The demo run once, as ``make demo`` runs it: (its folder, its store, what it printed).
    The demo takes a while to form the sample: the tests below read this one run, and the
    second run (with ``--trace``) goes over the same store."""
    where = tmp_path_factory.mktemp("demo")
    db = where / ".runtime" / "demo.db"
    result = subprocess.run([sys.executable, "-m", "ops.demo", "--db", str(db)],
                            cwd=where, env=_demo_env(), capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-4000:]
    return where, db, result


def _runs_section(out: str) -> str:
    return out.split("=== Formation runs (stage timings)")[1].split("=== Memory context")[0]


def test_the_demo_forms_the_sample_and_prints_every_section(first_run):
    where, db, result = first_run
    env = _demo_env()
    out = result.stdout
    assert "llm: offline" in out and "embedder: hashing-384" in out
    assert "replaying sample" in result.stdout + result.stderr
    assert "warning: sessions still forming" not in out
    for section in (
        "=== Facts of agent-juniper",
        "=== Reflections of agent-juniper",
        "=== Consolidated memory of agent-juniper",
        "=== Formation runs (stage timings)",
        "=== Memory context for user-maya in s3-maya-followup",
        "=== search_facts('Where does Maya live now?')",
    ):
        assert section in out, f"missing {section!r} in:\n{out[-3000:]}"
    runs_section = _runs_section(out)
    assert runs_section.count(" done ") >= 4 and "extract_facts" in runs_section and " ms" in runs_section
    shown = out.split("=== Memory context for user-maya")[1].split("=== search_facts")[0]
    assert "<RelevantFacts>" in shown and "Porto" in shown.split("</RelevantFacts>")[0]  # found for the question
    assert "63 messages in 4 sessions formed" in out
    # one Memory Instruction's effect: the caterer's facts of the group session are left out
    effect = out.split("Memory Instructions (docs/owner.md): with `ignore: catering`")[1].split("try it:")[0]
    assert "The caterer needs the final guest count by March 10" in effect and "Porto" not in effect
    assert db.exists()
    # the ready-to-paste line reads this demo's store, from any folder
    [line] = [l for l in out.splitlines() if l.startswith("MEMORY_STORE_URL=")]
    assignment, command = line.split(" memoryctl ", 1)
    assert assignment == f"MEMORY_STORE_URL=sqlite:///{db.resolve()}"
    pasted = subprocess.run(
        [sys.executable, "-m", "ops.cli", *shlex.split(command)], cwd=REPO_ROOT, capture_output=True, text=True,
        env={**env, "MEMORY_STORE_URL": assignment.split("=", 1)[1]}, timeout=120,
    )
    assert pasted.returncode == 0, pasted.stderr
    assert pasted.stdout.startswith("<") and "Maya" in pasted.stdout


def test_a_second_run_starts_a_fresh_store_exports_each_runs_trace_and_memoryctl_cost_reads_it(first_run):
    where, db, first = first_run
    env = _demo_env()
    result = subprocess.run([sys.executable, "-m", "ops.demo", "--db", str(db), "--trace"],
                            cwd=where, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-4000:]
    # the demo's store is fresh each run: a second run forms the same number of runs
    assert _runs_section(result.stdout).count(" done ") == _runs_section(first.stdout).count(" done ")
    traces = sorted((where / ".runtime" / "traces").glob("*.json"))
    assert f"traces: {len(traces)} run(s) written to" in result.stdout and len(traces) >= 4
    stages = ["extract_facts", "embed_facts", "decide_facts", "extract_reflections", "consolidate", "finish"]
    for path in traces:
        exported = json.loads(path.read_text())
        assert {s["trace_id"] for s in exported["spans"]} == {exported["trace_id"]}
        names = [s["name"] for s in exported["spans"]]
        run_stages = [n for n in names if n in stages]
        assert list(dict.fromkeys(run_stages))[:len(stages)] == stages, (path.name, names)

    env["MEMORY_STORE_URL"] = f"sqlite:///{db}"
    cost = subprocess.run([sys.executable, "-m", "ops.cli", "cost", "--agent", "agent-juniper", "--json"],
                          cwd=where, env=env, capture_output=True, text=True, timeout=120)
    assert cost.returncode == 0, cost.stderr
    report = json.loads(cost.stdout)
    # the offline LLM and the hashing embedder: every call counted, and said to cost nothing
    assert report["total"]["usd"] == 0 and report["total"]["unpriced"] == []
    assert {r["price"] for r in report["total"]["by_model"].values()} == {"offline"}
    assert report["total"]["by_model"]["offline-rules-v1"]["calls"] >= 4 * 3
    by_stage = subprocess.run([sys.executable, "-m", "ops.cli", "cost", "--agent", "agent-juniper", "--by", "stage"],
                              cwd=where, env=env, capture_output=True, text=True, timeout=120)
    assert by_stage.returncode == 0 and "extract_facts" in by_stage.stdout and "offline ($0)" in by_stage.stdout
