"""runs, replay-failed, reembed and agent settings through memoryctl."""

from __future__ import annotations

import json

import pytest

from ops import cli
from usecases import runs as runs_module
from ops.commands import agents as agents_command
from ops.commands import runs as runs_command
from pipeline import sweep
from pipeline.clock import FrozenClock
from pipeline.embeddings.hashing import HashingEmbedder
from pipeline.ingest import ingest_raw_event
from pipeline.store import open_store
from pipeline.text import text_hash
from schemas.documents import Fact, LLMUsage, StageRecord
from schemas.settings import Settings
from testkit.sessions import cold_run


@pytest.fixture
def settings(tmp_path, monkeypatch) -> Settings:
    settings = Settings(store_url=f"sqlite:///{tmp_path / 'memory.db'}", embedding_provider="hashing",
                        hashing_embedding_dim=32)
    for module in (runs_command, agents_command):
        monkeypatch.setattr(module, "get_settings", lambda: settings)
    return settings


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def store(settings):
    store = open_store(settings)
    store.create_indexes()
    yield store
    store.close()


@pytest.fixture
def started(monkeypatch) -> list[str]:
    calls: list[str] = []
    monkeypatch.setattr(runs_command, "send_first_stage", calls.append)
    return calls


def test_runs_lists_status_stage_timings_tokens_and_errors(store, settings, clock, capsys):
    run_id = cold_run(store, settings, clock, "s1")
    now = clock.now()
    store.runs.start_stage(run_id, "extract_facts", now)
    store.runs.complete_stage(run_id, "extract_facts", StageRecord(
        status="done", output={"facts": []}, started_at=now, finished_at=now, duration_ms=812.5,
        attempts=1, usage=LLMUsage(calls=1, input_tokens=1200, output_tokens=85),
    ))
    store.runs.start_stage(run_id, "embed_facts", now)
    store.runs.fail_stage(run_id, "embed_facts", "embedding service unavailable", now)
    store.runs.fail_run(run_id, "embedding service unavailable", now, dead=False)

    assert cli.main(["runs", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["run_id"] == run_id and row["status"] == "failed" and row["reason"] == "cold"
    assert row["stages"]["extract_facts"]["ms"] == 812.5
    assert row["tokens"] == {"input": 1200, "output": 85, "calls": 1}
    assert row["stages"]["embed_facts"]["error"] == "embedding service unavailable"
    assert row["error"] == "embedding service unavailable"

    assert cli.main(["runs", "--status", "failed"]) == 0
    text = capsys.readouterr().out
    assert run_id in text and "812.5 ms" in text and "tokens in/out 1200/85" in text
    assert "1 run(s)" in text


def test_replay_failed_reopens_failed_and_dead_runs_and_starts_them(store, settings, clock, started, capsys):
    failed = cold_run(store, settings, clock, "s-failed")
    dead = cold_run(store, settings, clock, "s-dead")
    done = cold_run(store, settings, clock, "s-done")
    live = cold_run(store, settings, clock, "s-live")
    store.runs.update_run_fields(dead, attempts=5)
    store.runs.fail_run(failed, "timeout", clock.now(), dead=False)
    store.runs.fail_run(dead, "exhausted 5 attempts: timeout", clock.now(), dead=True)
    store.runs.finish_run(done, clock.now(), {}, [])

    assert cli.main(["replay-failed", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert sorted(result["replayed"]) == sorted([failed, dead])
    assert sorted(started) == sorted([failed, dead])
    for run_id in (failed, dead):
        run = store.runs.get_run(run_id)
        assert (run.status, run.attempts) == ("claimed", 1)
    assert store.runs.get_run(done).status == "done" and store.runs.get_run(live).status == "claimed"
    # nothing left to replay
    assert cli.main(["replay-failed", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["replayed"] == []


def test_replay_failed_can_target_one_run(store, settings, clock, started, capsys):
    first = cold_run(store, settings, clock, "s1")
    second = cold_run(store, settings, clock, "s2")
    for run_id in (first, second):
        store.runs.fail_run(run_id, "boom", clock.now(), dead=True)
    assert cli.main(["replay-failed", "--run", second]) == 0
    assert "replayed 1 run(s)" in capsys.readouterr().out
    assert started == [second] and store.runs.get_run(first).status == "dead"


def test_replay_failed_says_why_it_skipped_each_run(store, settings, clock, started, capsys):
    held = cold_run(store, settings, clock, "s1")
    store.runs.fail_run(held, "boom", clock.now(), dead=True)
    for i in range(4):  # newer messages: a new run claims the session meanwhile
        ingest_raw_event({
            "type": "message.added", "event_id": f"s1-new-{i}", "agent_id": "a1", "session_id": "s1",
            "message": {"message_id": f"n{i}", "role": "user", "sender_id": "u1", "content": "again",
                        "created_at": clock.now().isoformat()},
        }, store, settings, clock)
    clock.advance(minutes=10)
    [holder] = sweep.sweep_cold_sessions(store, settings, clock.now()).run_ids
    assert cli.main(["replay-failed", "--run", held, "--run", holder, "--run", "r-nope"]) == 1
    out = capsys.readouterr().out
    assert "replayed 0 run(s), skipped 3" in out
    assert f"skipped {held}: session s1 is held by run {holder}; replay this one once that run" in out
    assert f"skipped {holder}: it is claimed; only failed and dead runs are replayed" in out
    assert "skipped r-nope: no such run" in out
    assert started == []


def test_reembed_moves_every_live_fact_to_the_current_model_once(store, settings, clock, capsys):
    old = HashingEmbedder(16)
    texts = [f"fact number {i} about lamps" for i in range(70)]
    vectors = old.embed(texts)
    for i, (text, vector) in enumerate(zip(texts, vectors.vectors)):
        store.facts.insert_fact(Fact(fact_id=f"f{i}", agent_id="a1" if i % 2 else "a2", scope="agent", scope_key="agent",
                               content=text, hash=text_hash(text), embedding=vector,
                               embedding_model=old.model, formed_at=clock.now()))
    assert cli.main(["reembed", "--agent", "a1", "--batch", "16", "--json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert (report["reembedded"], report["model"]) == (35, "hashing-32")
    # the operator is told that the facts' model (what the workers wrote) is not this one
    warning = ("warning: the facts were embedded with hashing-16 (35 facts, newest formed "
               f"{clock.now().isoformat()}), but this reembed uses hashing-32 "
               "(MEMORY_EMBEDDING_PROVIDER=hashing in this shell)")
    assert report["warning"].startswith(warning) and f"\n{warning}" in captured.err
    assert cli.main(["reembed", "--agent", "a1", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["warning"] is None and "warning" not in captured.err
    a1 = store.facts.search_candidates("a1", ["agent"], "hashing-32")
    assert len(a1) == 35 and all(len(c.embedding) == 32 for c in a1)
    assert all(c.embedding is None for c in store.facts.search_candidates("a2", ["agent"], "hashing-32"))
    assert runs_module.reembed(store, HashingEmbedder(32)) == 35  # a2's facts now
    assert runs_module.reembed(store, HashingEmbedder(32)) == 0


def test_reembed_shows_its_progress_to_the_end_and_stays_quiet_under_json(store, settings, clock, capsys):
    old = HashingEmbedder(16)
    texts = [f"fact number {i} about lamps" for i in range(40)]
    for i, (text, vector) in enumerate(zip(texts, old.embed(texts).vectors)):
        store.facts.insert_fact(Fact(fact_id=f"f{i}", agent_id="a1", scope="agent", scope_key="agent", content=text,
                               hash=text_hash(text), embedding=vector, embedding_model=old.model, formed_at=clock.now()))
    assert cli.main(["reembed", "--agent", "a1", "--batch", "16"]) == 0
    captured = capsys.readouterr()
    # the bar counts the facts to re-embed, so it ends at its total (with a rate and an ETA)
    assert "re-embedding with hashing-32: 100%" in captured.err and "40/40" in captured.err
    assert captured.out.strip() == "re-embedded 40 fact(s) with hashing-32"

    store.facts.insert_fact(Fact(fact_id="f-new", agent_id="a1", scope="agent", scope_key="agent", content="one more lamp",
                           hash=text_hash("one more lamp"), embedding=old.embed(["x"]).vectors[0],
                           embedding_model=old.model, formed_at=clock.now()))
    assert cli.main(["reembed", "--agent", "a1", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["reembedded"] == 1
    assert "re-embedding" not in captured.err and "%" not in captured.err


def test_agent_settings_are_set_and_shown_through_the_cli(store, capsys):
    assert cli.main(["agent", "show", "agent-9", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["user_memory_enabled"] is True  # defaults, nothing written
    assert cli.main(["agent", "set", "agent-9", "--name", "Juniper", "--user-memory", "off"]) == 0
    assert "user-memory=off agent-memory=on" in capsys.readouterr().out
    assert cli.main(["agent", "set", "agent-9", "--agent-memory", "off"]) == 0
    capsys.readouterr()
    settings = store.ingest.get_agent_settings("agent-9")
    assert (settings.name, settings.user_memory_enabled, settings.agent_memory_enabled) == ("Juniper", False, False)


def test_an_agent_toggle_must_be_on_or_off():
    with pytest.raises(SystemExit):
        cli.main(["agent", "set", "agent-9", "--user-memory", "maybe"])


# ---------------------------------------------------------------------- runs --wait
def _end(store, settings, clock, session_id: str) -> None:
    ingest_raw_event({"type": "session.ended", "event_id": f"{session_id}-end", "agent_id": "a1",
                      "session_id": session_id}, store, settings, clock)


def test_formation_is_pending_while_a_run_is_claimed_and_not_once_it_is_done(store, settings, clock):
    run_id = cold_run(store, settings, clock, "s1")
    assert runs_module.formation_pending(store) == [f"run {run_id} of session s1 is claimed"]
    store.runs.finish_run(run_id, clock.now(), {}, [])
    assert runs_module.formation_pending(store) == []
    assert runs_module.formation_pending(store, agent_id="another") == []


def test_an_ended_session_is_pending_until_its_own_buffered_reflections_are_consolidated(store, settings, clock):
    from testkit.documents import reflection

    run_id = cold_run(store, settings, clock, "s1")
    store.runs.finish_run(run_id, clock.now(), {}, [])
    store.reflections.insert_reflections([reflection("r1", "Planning the venue", scope="session", session="s1")])
    assert runs_module.formation_pending(store) == []          # not ended: its buffer waits for more
    _end(store, settings, clock, "s1")
    assert runs_module.formation_pending(store) == ["session s1 ended: its buffered reflections are being consolidated"]
    store.reflections.mark_absorbed(["r1"], 1, clock.now())
    assert runs_module.formation_pending(store) == []


def test_an_ended_session_whose_run_is_not_claimed_yet_is_pending(store, settings, clock):
    run_id = cold_run(store, settings, clock, "s1")
    store.runs.finish_run(run_id, clock.now(), {}, [])
    from testkit.documents import message

    # stored, and the session ended, a moment before the ingest claims the session-end run
    store.ingest.ingest_message(message(9, session="s1", event_id="late", created=clock.now()), clock.now())
    store.ingest.mark_session_ended("s1", clock.now())
    assert runs_module.formation_pending(store) == [
        "session s1 ended with 1 unformed message(s): its run is being claimed"]


def test_runs_wait_gives_up_after_its_timeout_naming_what_is_pending(store, settings, clock, capsys):
    run_id = cold_run(store, settings, clock, "s1")
    assert cli.main(["runs", "--wait", "--timeout", "0.6"]) == 1
    captured = capsys.readouterr()
    assert f"still pending after 0.6 s: run {run_id} of session s1 is claimed" in captured.err
    assert "1 run(s)" in captured.out


def test_runs_wait_returns_once_the_run_is_done_and_lists_it(store, settings, clock, capsys):
    import threading

    run_id = cold_run(store, settings, clock, "s1")
    def finish():
        other = open_store(settings)  # another process's connection, as a worker's would be
        try:
            other.runs.finish_run(run_id, clock.now(), {}, [])
        finally:
            other.close()

    finisher = threading.Timer(1.0, finish)
    finisher.start()
    try:
        assert cli.main(["runs", "--wait", "--timeout", "30", "--status", "done"]) == 0
    finally:
        finisher.join()
    captured = capsys.readouterr()
    assert f"waiting: run {run_id} of session s1 is claimed" in captured.err
    assert run_id in captured.out and " done " in captured.out and "1 run(s)" in captured.out
