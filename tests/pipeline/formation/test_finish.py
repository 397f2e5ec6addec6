"""finish: totals, watermark, version stamps, and what starts next."""

from __future__ import annotations

from pipeline.formation import finish as finish_mod

from testkit.formation import ALICE_CHAT, facts, merge_all, reflections

STAGES = ["extract_facts", "embed_facts", "decide_facts", "extract_reflections", "consolidate", "finish"]


def scripted(env):
    env.llm.on("extract_facts", facts(("user", "Alice's email is alice@example.com")))
    env.llm.on("extract_reflections", reflections(user=["Alice prefers short answers"]))
    env.llm.on("consolidate", merge_all)


def test_finish_closes_the_run_with_totals_watermark_and_stamps(env):
    scripted(env)
    run_id = env.new_run(ALICE_CHAT, session_id="s-1")
    result, nxt = env.whole_chain(run_id)
    run = env.store.runs.get_run(run_id)
    assert run.status == "done"
    assert all(run.stages[s].status == "done" and run.stages[s].duration_ms is not None for s in STAGES)
    totals = run.totals
    assert totals["llm_calls"] == 2 and totals["tokens"]["total"] > 0
    assert totals["facts"]["added"] == 1 and totals["reflections"]["user"] == 1
    assert set(totals["timings_ms"]) >= set(STAGES[:-1])
    assert env.store.ingest.get_session("s-1").watermark == run.seq_to
    stamps = env.store.leases.get_scope_versions("agent-1", ["user:u-1", "agent"])
    assert stamps["user:u-1"] > 0 and stamps["agent"] == 0
    assert nxt == finish_mod.NextStep()


def test_messages_that_arrived_during_the_run_start_the_next_run_when_due(env):
    scripted(env)
    env.settings.formation_message_interval = 4
    run_id = env.new_run(ALICE_CHAT, session_id="s-1")
    env.through_reflections(run_id)
    env.add_messages(ALICE_CHAT, session_id="s-1")  # 4 more: the threshold holds again
    _, nxt = env.whole_chain(run_id)
    assert nxt.run_id is not None
    new = env.store.runs.get_run(nxt.run_id)
    assert (new.seq_from, new.seq_to, new.reason) == (5, 8, "threshold")


def test_a_session_that_ended_during_the_run_has_its_remainder_claimed(env):
    scripted(env)
    run_id = env.new_run(ALICE_CHAT, session_id="s-1")
    env.add_messages([("user", "u-1", "one more thing")], session_id="s-1")
    env.store.ingest.mark_session_ended("s-1", env.clock.now())
    _, nxt = env.whole_chain(run_id)
    assert env.store.runs.get_run(nxt.run_id).reason == "session_end"


def test_a_session_that_ended_with_nothing_left_asks_for_its_leftover_consolidation(env):
    scripted(env)
    run_id = env.new_run(ALICE_CHAT, session_id="s-1")
    env.through_reflections(run_id)
    from pipeline.formation import consolidate_stages as cs

    cs.consolidate(run_id, env)  # ran before the session ended: not in session-end mode
    env.store.ingest.mark_session_ended("s-1", env.clock.now())
    _, nxt = finish_mod.finish(run_id, env)
    assert nxt.consolidate_session == ("agent-1", "s-1")


def test_a_redelivered_finish_closes_nothing_twice(env):
    scripted(env)
    run_id = env.new_run(ALICE_CHAT, session_id="s-1")
    env.whole_chain(run_id)
    before = env.store.runs.get_run(run_id)
    stamps = env.store.leases.get_scope_versions("agent-1", ["user:u-1"])
    result, nxt = finish_mod.finish(run_id, env)
    assert result is None and nxt == finish_mod.NextStep()
    assert env.store.runs.get_run(run_id).totals == before.totals
    assert env.store.leases.get_scope_versions("agent-1", ["user:u-1"]) == stamps
