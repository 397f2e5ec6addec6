"""End to end: a real redis-server, a real Celery worker process on SQLite, the offline LLM
provider and the hashing embedder. The 60-message mix of ``tests/fixtures/formation_e2e`` is
published through ``workers.producer``; the store must then match the expectations fixture,
which was written before the formation chain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.store.sqlite import SQLiteStore
from pipeline.text import word_count
from schemas.documents import AgentSettings
from testkit.waiting import settle, store_state
from workers.producer import CeleryPublisher, end_session, publish_messages

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "formation_e2e"


@pytest.fixture
def scenario(tmp_path, broker_urls, celery_worker_process, celery_app_for):
    db = tmp_path / "memory.db"
    store = SQLiteStore(str(db))
    store.create_indexes()
    worker = celery_worker_process(
        store_url=f"sqlite:///{db}", queues=("ingest", "formation", "consolidation"), concurrency=3,
        extra_env={"MEMORY_LLM_PROVIDER": "offline", "MEMORY_EMBEDDING_PROVIDER": "hashing"},
    )
    publisher = CeleryPublisher(app=celery_app_for(*broker_urls))
    yield store, worker, publisher
    publisher.close()
    store.close()


def _events(conversation: dict, session: dict) -> list[dict]:
    name = conversation["agents"][session["agent_id"]]["name"]
    return [
        {"agent_id": session["agent_id"], "session_id": session["session_id"], "agent_name": name,
         "user_tier": session["user_tier"], **{k: m[k] for k in (
             "message_id", "role", "sender_id", "sender_name", "content", "created_at", "session_users")}}
        for m in session["messages"]
    ]


def _settled(store: SQLiteStore, sessions: list[dict]) -> bool:
    for s in sessions:
        state = store.ingest.get_session(s["session_id"])
        if state is None or state.ended_at is None or state.last_seq < len(s["messages"]):
            return False
        if state.watermark < state.last_seq:
            return False
        if any(r.status != "done" for r in store.runs.list_runs(session_id=s["session_id"])):
            return False
    return True


def _wait(store, worker, sessions):
    """Until every session is formed, for as long as formation keeps writing to the store."""
    def runs():
        return [(r.session_id, r.status, r.error) for s in sessions for r in store.runs.list_runs(session_id=s["session_id"])]

    def done() -> bool:
        if any(status in ("failed", "dead") for _, status, _ in runs()) or not worker.is_alive():
            pytest.fail(f"formation broke: runs {runs()}\nworker log:\n{worker.log_text()[-4000:]}")
        return _settled(store, sessions)

    if not settle(done, lambda: store_state(store), confirm_s=0.0, interval=0.2):
        pytest.fail(f"formation did not settle: runs {runs()}\nworker log:\n{worker.log_text()[-4000:]}")


def _live(store, agent_id, scope_key):
    return store.facts.list_facts(agent_id, scope_key)


def _has(text: str, parts: list[str]) -> bool:
    return all(p.lower() in text.lower() for p in parts)


def check_first_phase(store, exp):
    for planted in exp["planted_facts"]:
        texts = [f.content for f in _live(store, planted["agent_id"], planted["scope_key"])]
        assert any(_has(t, planted["contains"]) for t in texts), f"planted fact {planted} missing from {texts}"
    for want in exp["blobs_version_1"]:
        blob = store.blobs.get_blob(want["agent_id"], want["scope_key"])
        assert blob is not None, f"no blob for {want}"
        assert blob.version == 1 and blob.consolidated_content.startswith("VERSION: 1\n"), blob
        assert word_count(blob.consolidated_content) <= want["word_limit"]
    for buf in exp["buffers_over_threshold"]:
        formed = store.reflections.list_reflections(buf["agent_id"], buf["scope_key"])
        assert len(formed) >= buf["threshold"], f"{buf['scope_key']}: {len(formed)} reflections formed"
        assert all(r.absorbed and r.consolidated_into == 1 for r in formed)
    for group in exp["group_sessions_without_user_memory"]:
        for user in group["users"]:
            key = f"user:{user}"
            assert store.facts.list_facts(group["agent_id"], key, include_retired=True) == []
            assert store.reflections.list_reflections(group["agent_id"], key) == []
            assert store.blobs.get_blob(group["agent_id"], key) is None
        for run in store.runs.list_runs(session_id=group["session_id"]):
            assert "user" not in run.scopes_enabled


def check_second_phase(store, exp):
    for upd in exp["updates"]:
        facts = store.facts.list_facts(upd["agent_id"], upd["scope_key"])
        [fact] = [f for f in facts if upd["now_contains"] in f.content]
        assert fact.version == upd["version"]
        assert any(upd["history_contains"] in h.content for h in fact.history)
        assert not any(upd["history_contains"] in f.content for f in facts)
    for rest in exp["restatements"]:
        facts = [f for f in store.facts.list_facts(rest["agent_id"], rest["scope_key"]) if _has(f.content, rest["contains"])]
        assert len(facts) == rest["live_facts"]
        [run] = store.runs.list_runs(session_id=rest["session_id"])
        decisions = run.stages["decide_facts"].output["decisions"]
        extracted = run.stages["extract_facts"].output["facts"]
        restated = [f["index"] for f in extracted if _has(f["text"], rest["contains"])]
        assert restated and all(d["action"] == rest["decision"] for d in decisions if d["index"] in restated)


def check_runs(store, sessions, every):
    for s in sessions:
        runs = store.runs.list_runs(session_id=s["session_id"])
        assert runs
        for run in runs:
            assert run.status == every["status"]
            for stage in every["stages"]:
                record = run.stages[stage]
                assert record.status == "done", (run.run_id, stage, record)
                for field in every["stage_fields"]:
                    assert getattr(record, field) is not None, (stage, field)
                if record.usage.calls:
                    assert record.usage.input_tokens > 0 and record.usage.output_tokens > 0
            for key in every["totals"]:
                assert key in run.totals, (key, run.totals)
            assert run.totals["tokens"]["total"] == sum(
                r.usage.input_tokens + r.usage.output_tokens for n, r in run.stages.items() if n != "finish")


def test_sixty_messages_form_the_memory_the_fixture_expects(scenario):
    store, worker, publisher = scenario
    conversation = json.loads((FIXTURE / "conversation.json").read_text())
    expectations = json.loads((FIXTURE / "expectations.json").read_text())
    for agent_id, agent in conversation["agents"].items():
        store.ingest.put_agent_settings(AgentSettings(agent_id=agent_id, name=agent["name"]))
    everyone = []
    for phase in conversation["phases"]:
        sessions = phase["sessions"]
        for s in sessions:
            publish_messages(_events(conversation, s), publisher=publisher)
            end_session(s["agent_id"], s["session_id"], publisher=publisher)
        _wait(store, worker, sessions)
        everyone += sessions
        checks = {"first sessions": check_first_phase, "correction and restatement": check_second_phase}
        checks[phase["name"]](store, expectations["after_phase"][phase["name"]])
    check_runs(store, everyone, expectations["every_run"])
