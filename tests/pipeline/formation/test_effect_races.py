"""Two runs of one agent (two sessions) decide on the same stored fact at once, on the real
SQLite store: run A retires it while run B, whose decision was taken before, merges into it.
Nothing B learned may be lost (design §11 "Time")."""

from __future__ import annotations

import dataclasses

from pipeline.formation import finish, stages
from pipeline.llm.scripted import ScriptedLLM

from testkit.formation import decisions, facts, snapshot

VENUE = "The venue is Riverside Park"


def _through_embedding(env, text: str, session_id: str) -> str:
    env.llm.on("extract_facts", facts(("agent", text)), times=1)
    run_id = env.new_run([("user", "u-1", text), ("assistant", None, "Noted.")], session_id=session_id)
    stages.extract_facts(run_id, env)
    stages.embed_facts(run_id, env)
    return run_id


def _seed(env) -> str:
    run_id = _through_embedding(env, VENUE, "s-seed")
    stages.decide_facts(run_id, env)
    [fact] = env.live_facts()
    return fact.fact_id


def _interleaved(env, a_answer, b_answer) -> tuple[str, str]:
    """A and B both shortlist the seeded fact; A decides and applies its effects while B
    waits for its own decision (inside B's LLM call), then B applies."""
    run_a = _through_embedding(env, "The Riverside Park venue is cancelled", "s-a")
    run_b = _through_embedding(env, "Guests enter Riverside Park by the north gate", "s-b")
    env_a = dataclasses.replace(env, llm=ScriptedLLM().on("decide_facts", a_answer))

    def b_decides(request):
        assert stages.decide_facts(run_a, env_a) is not None
        return b_answer

    env.llm.on("decide_facts", b_decides, times=1)
    assert stages.decide_facts(run_b, env) is not None
    assert env_a.llm.count("decide_facts") == 1 and env.llm.count("decide_facts") == 1
    return run_a, run_b


def test_an_update_of_a_fact_another_run_retired_meanwhile_adds_what_was_said(env):
    seeded = _seed(env)
    run_a, run_b = _interleaved(
        env, decisions((0, "DELETE", 0)),
        decisions((0, "UPDATE", 0, "The venue is Riverside Park; guests enter by the north gate")),
    )
    live = {f.content: f for f in env.live_facts()}
    assert set(live) == {"The Riverside Park venue is cancelled", "Guests enter Riverside Park by the north gate"}
    assert live["Guests enter Riverside Park by the north gate"].source_run_id == run_b
    [retired] = [f for f in env.all_facts() if f.fact_id == seeded]
    assert retired.retired_by == run_a and retired.content == VENUE and retired.version == 1
    run = env.store.runs.get_run(run_b)
    assert run.effect_notes == [{"index": 0, "fact_id": seeded, "note": "update_of_retired",
                                 "retired_by": run_a, "added": f"{run_b}:0"}]
    counts = finish.run_totals(run)["facts"]
    assert (counts["updated"], counts["added"], counts["update_of_retired"]) == (0, 1, 1)


def test_the_stage_rerun_after_the_race_applies_nothing_twice(env):
    _seed(env)
    _, run_b = _interleaved(env, decisions((0, "DELETE", 0)), decisions((0, "UPDATE", 0, "Merged text")))
    before, notes = snapshot(env), env.store.runs.get_run(run_b).effect_notes
    result = stages.decide_facts(run_b, env)
    assert result.reused
    assert snapshot(env) == before and env.store.runs.get_run(run_b).effect_notes == notes


def test_a_delete_of_a_fact_another_run_retired_meanwhile_still_adds_the_new_fact_and_says_so(env):
    seeded = _seed(env)
    _, run_b = _interleaved(env, decisions((0, "DELETE", 0)), decisions((0, "DELETE", 0)))
    assert {f.content for f in env.live_facts()} == {
        "The Riverside Park venue is cancelled", "Guests enter Riverside Park by the north gate"}
    run = env.store.runs.get_run(run_b)
    assert [(n["fact_id"], n["note"]) for n in run.effect_notes] == [(seeded, "delete_of_retired")]
    assert finish.run_totals(run)["facts"]["delete_of_retired"] == 1


def test_an_update_that_finds_its_fact_live_records_no_note(env):
    seeded = _seed(env)
    run_b = _through_embedding(env, "Guests enter Riverside Park by the north gate", "s-b")
    env.llm.on("decide_facts", decisions((0, "UPDATE", 0, "The venue is Riverside Park, north gate")), times=1)
    stages.decide_facts(run_b, env)
    [fact] = env.live_facts()
    assert fact.fact_id == seeded and fact.version == 2
    assert env.store.runs.get_run(run_b).effect_notes == []


A_MERGED = "The venue is Riverside Park, Hall 2"


def test_an_update_of_a_fact_another_run_changed_meanwhile_adds_what_was_said_and_keeps_the_others(env):
    seeded = _seed(env)
    run_a, run_b = _interleaved(
        env, decisions((0, "UPDATE", 0, A_MERGED)),
        decisions((0, "UPDATE", 0, "The venue is Riverside Park; guests enter by the north gate")),
    )
    live = {f.content: f for f in env.live_facts()}
    assert set(live) == {A_MERGED, "Guests enter Riverside Park by the north gate"}
    assert live[A_MERGED].fact_id == seeded and [h.run_id for h in live[A_MERGED].history] == [run_a]
    run = env.store.runs.get_run(run_b)
    assert [(n["fact_id"], n["note"], n["added"]) for n in run.effect_notes] == [
        (seeded, "update_of_changed", f"{run_b}:0")]
    counts = finish.run_totals(run)["facts"]
    assert (counts["updated"], counts["added"], counts["update_of_changed"]) == (0, 1, 1)


def test_a_delete_decided_on_an_older_version_leaves_the_other_runs_text_live(env):
    seeded = _seed(env)
    _, run_b = _interleaved(env, decisions((0, "UPDATE", 0, A_MERGED)), decisions((0, "DELETE", 0)))
    assert {f.content for f in env.live_facts()} == {A_MERGED, "Guests enter Riverside Park by the north gate"}
    run = env.store.runs.get_run(run_b)
    assert [(n["fact_id"], n["note"]) for n in run.effect_notes] == [(seeded, "delete_of_changed")]
    assert finish.run_totals(run)["facts"]["delete_of_changed"] == 1
