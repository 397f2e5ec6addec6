"""extract_facts -> embed_facts -> decide_facts on fakes: scopes, toggles, dedup actions."""

from __future__ import annotations

import threading
from datetime import datetime, timezone

import pytest

from pipeline.errors import InvalidLLMAnswer
from pipeline.formation import stages
from schemas.documents import AgentSettings

from testkit.formation import ALICE_CHAT, decisions, facts, reflections

EMAIL = "Alice's email is alice@example.com"
GROUP = [("user", "u-1", "Hi, I'm Alice."), ("user", "u-2", "I'm Bob."), ("assistant", None, "Welcome.")]


def run_fact_stages(env, run_id):
    for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts):
        stage(run_id, env)


def test_first_stage_records_scopes_and_models_on_the_run(env):
    env.llm.on("extract_facts", facts(("user", EMAIL)))
    run_id = env.new_run(ALICE_CHAT)
    stages.extract_facts(run_id, env)
    run = env.store.runs.get_run(run_id)
    assert run.scopes_enabled == ["agent", "user", "session"]
    assert set(run.models) == {"fast", "tier"}
    assert run.stages["extract_facts"].status == "done"
    assert run.stages["extract_facts"].usage.calls == 1
    assert run.stages["extract_facts"].usage.input_tokens > 0


def test_new_facts_without_candidates_are_added_without_a_dedup_call(env):
    env.llm.on("extract_facts", facts(("user", EMAIL), ("agent", "The Mars Festival budget is $50,000")))
    run_id = env.new_run(ALICE_CHAT)
    run_fact_stages(env, run_id)
    assert env.llm.count("decide_facts") == 0
    by_id = {f.fact_id: f for f in env.live_facts()}
    assert set(by_id) == {f"{run_id}:0", f"{run_id}:1"}
    assert by_id[f"{run_id}:0"].scope_key == "user:u-1" and by_id[f"{run_id}:0"].user_id == "u-1"
    assert by_id[f"{run_id}:1"].scope_key == "agent"
    assert by_id[f"{run_id}:0"].embedding_model == env.embedder.model
    assert env.store.runs.get_run(run_id).stages["embed_facts"].output["vectors"]


def test_a_fact_over_the_word_limit_is_dropped_and_counted_not_cut(env):
    long_fact = " ".join(["word"] * 31)
    env.llm.on("extract_facts", facts(("user", long_fact), ("user", EMAIL)))
    run_id = env.new_run(ALICE_CHAT)
    run_fact_stages(env, run_id)
    assert [f.content for f in env.live_facts()] == [EMAIL]
    assert env.store.runs.get_run(run_id).stages["extract_facts"].output["dropped"]["over_limit"] == 1


def test_group_chat_drops_user_facts_and_never_rescopes_them_to_the_agent(env):
    env.llm.on("extract_facts", facts(("user", "Bob's email is bob@example.com"), ("agent", "The venue is Riverside Park")))
    run_id = env.new_run(GROUP, users=("u-1", "u-2"))
    run_fact_stages(env, run_id)
    assert [(f.scope, f.content) for f in env.live_facts()] == [("agent", "The venue is Riverside Park")]
    assert env.store.runs.get_run(run_id).scopes_enabled == ["agent", "session"]
    assert env.store.runs.get_run(run_id).stages["extract_facts"].output["dropped"]["scope_not_allowed"] == 1


def test_a_group_declared_at_session_start_is_a_group_chat_in_every_prompt_before_bob_speaks(env):
    env.store.ingest.declare_session_users("s-1", "agent-1", ["u-1", "u-2"])
    env.llm.on("extract_facts", facts(("user", EMAIL), ("agent", "The venue is Riverside Park")))
    env.llm.on("extract_reflections", reflections(user=["Alice likes brevity"], session=["Planning the venue"]))
    run_id = env.new_run(ALICE_CHAT, session_id="s-1", users=())  # alice alone has spoken
    env.through_reflections(run_id)
    calls = {c.operation: c.inputs for c in env.llm.calls}
    assert calls["extract_facts"]["group_chat"] and calls["extract_facts"]["scopes"] == ["agent"]
    assert calls["extract_reflections"]["group_chat"] and "user" not in calls["extract_reflections"]["scopes"]
    assert [(f.scope, f.content) for f in env.live_facts()] == [("agent", "The venue is Riverside Park")]
    assert env.store.reflections.list_reflections("agent-1", "user:u-1") == []


def test_both_agent_toggles_off_skip_the_facts_llm_call(env):
    env.store.ingest.put_agent_settings(AgentSettings(agent_id="agent-1", user_memory_enabled=False, agent_memory_enabled=False))
    run_id = env.new_run(ALICE_CHAT)
    run_fact_stages(env, run_id)
    assert env.llm.count() == 0
    assert env.live_facts() == []
    assert env.store.runs.get_run(run_id).scopes_enabled == ["session"]


def test_user_toggle_off_keeps_agent_facts_only(env):
    env.store.ingest.put_agent_settings(AgentSettings(agent_id="agent-1", user_memory_enabled=False))
    env.llm.on("extract_facts", facts(("user", EMAIL), ("agent", "The venue is Riverside Park")))
    run_id = env.new_run(ALICE_CHAT)
    run_fact_stages(env, run_id)
    assert [f.scope for f in env.live_facts()] == ["agent"]


def _seed(env, text=EMAIL):
    env.llm.on("extract_facts", facts(("user", text)), times=1)
    first = env.new_run(ALICE_CHAT)
    run_fact_stages(env, first)
    return env.live_facts()[0].fact_id


def _second_run(env, text, answer):
    env.llm.on("extract_facts", facts(("user", text)), times=1)
    env.llm.on("decide_facts", answer, times=1)
    run_id = env.new_run([("user", "u-1", "update"), ("assistant", None, "ok")])
    run_fact_stages(env, run_id)
    return run_id


def test_update_merges_text_bumps_version_and_keeps_history(env):
    old_id = _seed(env)
    run_id = _second_run(env, "Alice's email is alice@example.org now",
                         decisions((0, "UPDATE", 0, "Alice's email is alice@example.org")))
    [fact] = env.all_facts()
    assert fact.fact_id == old_id and fact.content == "Alice's email is alice@example.org"
    assert fact.version == 2
    assert [h.content for h in fact.history] == [EMAIL]
    assert fact.history[0].run_id == run_id
    [call] = [c for c in env.llm.calls if c.operation == "decide_facts"]
    assert call.inputs["items"][0]["candidates"] == [{"alias": 0, "text": EMAIL}]


def test_delete_retires_the_contradicted_fact_and_adds_the_new_one(env):
    old_id = _seed(env)
    run_id = _second_run(env, "Alice's email alice@example.com was closed", decisions((0, "DELETE", 0)))
    facts_now = {f.fact_id: f for f in env.all_facts()}
    assert facts_now[old_id].retired_at is not None
    assert facts_now[f"{run_id}:0"].retired_at is None
    assert [f.fact_id for f in env.live_facts()] == [f"{run_id}:0"]


def test_none_changes_nothing(env):
    _seed(env)
    run_id = _second_run(env, "Alice's email address is alice@example.com", decisions((0, "NONE")))
    assert [f.content for f in env.all_facts()] == [EMAIL]
    assert env.store.runs.get_run(run_id).stages["decide_facts"].output["counts"]["none"] == 1


def test_add_with_candidates_inserts_beside_them(env):
    _seed(env)
    _second_run(env, "Alice's second email is alice@work.example.com", decisions((0, "ADD")))
    assert len(env.live_facts()) == 2


def test_exact_duplicate_is_none_without_an_llm_call(env):
    _seed(env)
    env.llm.on("extract_facts", facts(("user", "  alice's EMAIL is alice@example.com. ")), times=1)
    run_id = env.new_run([("user", "u-1", "again"), ("assistant", None, "ok")])
    run_fact_stages(env, run_id)
    assert env.llm.count("decide_facts") == 0
    assert len(env.all_facts()) == 1
    [d] = env.store.runs.get_run(run_id).stages["decide_facts"].output["decisions"]
    assert (d["action"], d["reason"]) == ("NONE", "exact")


def test_dedup_off_adds_without_the_llm(env):
    env.settings.facts_dedup = False
    _seed(env)
    env.llm.on("extract_facts", facts(("user", "Alice's email is alice@example.org")), times=1)
    run_fact_stages(env, env.new_run([("user", "u-1", "x"), ("assistant", None, "y")]))
    assert env.llm.count("decide_facts") == 0
    assert len(env.live_facts()) == 2


@pytest.mark.parametrize("bad", [
    decisions((0, "UPDATE", 7, "Alice's email is alice@example.org")),   # alias outside candidates
    decisions((0, "DELETE", None)),                                       # DELETE without an alias
    decisions((3, "ADD")),                                                # unknown new fact
    decisions(),                                                          # no decision at all
    decisions((0, "UPDATE", 0, None)),                                    # UPDATE without text
])
def test_a_decision_outside_the_candidates_is_rejected_and_asked_again(env, bad):
    old_id = _seed(env)
    env.llm.on("extract_facts", facts(("user", "Alice's email is alice@example.org now")), times=1)
    env.llm.on("decide_facts", bad, times=1)
    env.llm.on("decide_facts", decisions((0, "UPDATE", 0, "Alice's email is alice@example.org")), times=1)
    run_id = env.new_run([("user", "u-1", "x"), ("assistant", None, "y")])
    stages.extract_facts(run_id, env)
    stages.embed_facts(run_id, env)
    with pytest.raises(InvalidLLMAnswer):
        stages.decide_facts(run_id, env)
    assert [f.version for f in env.all_facts()] == [1]
    assert env.store.runs.get_run(run_id).stages["decide_facts"].status != "done"
    stages.decide_facts(run_id, env)  # the redelivery asks again
    assert env.store.facts.get_facts([old_id])[0].version == 2


def test_exact_duplicates_never_make_a_second_fact_when_two_runs_race(env):
    text = "Alice's phone number is +49 40 5550 1234"
    env.llm.on("extract_facts", facts(("user", text)))
    env.llm.on("decide_facts", decisions((0, "ADD")))
    runs = []
    for session in ("s-a", "s-b"):
        runs.append(env.new_run(ALICE_CHAT, session_id=session))
        stages.extract_facts(runs[-1], env)
        stages.embed_facts(runs[-1], env)
    barrier = threading.Barrier(2)
    errors = []

    def decide(run_id):
        try:
            barrier.wait()
            stages.decide_facts(run_id, env)
        except Exception as exc:  # collected and re-raised in the test thread
            errors.append(exc)

    threads = [threading.Thread(target=decide, args=(r,)) for r in runs]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert errors == []
    assert [f.content for f in env.all_facts()] == [text]


def test_reflections_do_not_repeat_new_facts_and_session_ones_are_always_formed(env):
    env.store.ingest.put_agent_settings(AgentSettings(agent_id="agent-1", user_memory_enabled=False, agent_memory_enabled=False))
    env.llm.on("extract_reflections", reflections(
        agent=["The team ships on Fridays"], user=["Alice prefers short answers"],
        session=["Alice wants a migration plan today", EMAIL],
    ))
    run_id = env.new_run(ALICE_CHAT)
    env.through_reflections(run_id)
    stored = env.store.reflections.list_reflections("agent-1", "session:s-1")
    assert [r.content for r in stored] == ["Alice wants a migration plan today", EMAIL]
    assert env.store.reflections.list_reflections("agent-1", "agent") == []
    assert env.store.reflections.list_reflections("agent-1", "user:u-1") == []
    counts = env.store.runs.get_run(run_id).stages["extract_reflections"].output["counts"]
    assert counts["scope_not_allowed"] == 2


def test_a_reflection_repeating_a_fact_of_this_run_is_dropped(env):
    env.llm.on("extract_facts", facts(("user", EMAIL)))
    env.llm.on("extract_reflections", reflections(user=[EMAIL, "Alice prefers short answers"]))
    run_id = env.new_run(ALICE_CHAT)
    env.through_reflections(run_id)
    assert [r.content for r in env.store.reflections.list_reflections("agent-1", "user:u-1")] == ["Alice prefers short answers"]
    [call] = [c for c in env.llm.calls if c.operation == "extract_reflections"]
    assert EMAIL in call.inputs["new_facts"]


def test_group_chat_forms_no_user_reflections(env):
    env.llm.on("extract_facts", facts())
    env.llm.on("extract_reflections", reflections(agent=["Festival planning is underway"],
                                                  user=["Bob likes bullet points"], session=["Pin the map"]))
    run_id = env.new_run(GROUP, users=("u-1", "u-2"))
    env.through_reflections(run_id)
    dump = env.store.admin.dump_all()
    refl = next(rows for name, rows in dump.items() if name.endswith("reflections"))
    assert sorted(r["scope"] for r in refl) == ["agent", "session"]


def test_an_extracted_deadline_becomes_the_facts_expiry_and_a_bad_one_is_dropped_and_counted(env):
    answer = facts(("agent", "The caterer needs the guest count by March 10"), ("agent", "The venue is in Tucson"),
                   ("agent", "The band arrives on June 2"))
    answer.facts[0].expires_at = "2026-03-10"
    answer.facts[1].expires_at = "2026-03-10T18:00:00+01:00"
    answer.facts[2].expires_at = "soon"
    env.llm.on("extract_facts", answer)
    run_id = env.new_run(ALICE_CHAT)
    run_fact_stages(env, run_id)
    by_text = {f.content: f.expires_at for f in env.store.facts.list_facts("agent-1", include_retired=True)}
    assert by_text == {
        "The caterer needs the guest count by March 10": datetime(2026, 3, 11, tzinfo=timezone.utc),
        "The venue is in Tucson": datetime(2026, 3, 10, 17, tzinfo=timezone.utc),
        "The band arrives on June 2": None,
    }
    assert env.store.runs.get_run(run_id).stages["extract_facts"].output["dropped"]["expiry_invalid"] == 1


def test_a_statement_held_by_an_expired_fact_is_stored_anew_and_the_expired_one_stamped(env):
    from datetime import timedelta

    from testkit.documents import fact

    said = "The caterer needs the guest count by March 10"
    old = fact("old", said, agent="agent-1", formed=env.clock.now() - timedelta(days=30))
    expired_at = env.clock.now() - timedelta(days=1)
    env.store.facts.insert_fact(old.model_copy(update={"expires_at": expired_at}))
    env.llm.on("extract_facts", facts(("agent", said)))
    run_id = env.new_run(ALICE_CHAT)
    run_fact_stages(env, run_id)
    assert [(f.fact_id, f.content) for f in env.live_facts()] == [(f"{run_id}:0", said)]
    [stamped] = env.store.facts.get_facts(["old"])
    assert stamped.retired_reason == "expired" and stamped.valid_to == expired_at


def test_an_expired_fact_is_no_dedup_candidate(env):
    from datetime import timedelta

    from testkit.documents import fact

    old_text = "The caterer needs the guest count for the gala by March 10"
    old = fact("old", old_text, agent="agent-1", embedding=env.embedder.embed([old_text]).vectors[0],
               model=env.embedder.model, formed=env.clock.now() - timedelta(days=30))
    env.store.facts.insert_fact(old.model_copy(update={"expires_at": env.clock.now() - timedelta(days=1)}))
    said = "The caterer needs the final guest count for the gala by March 10"
    env.llm.on("extract_facts", facts(("agent", said)))
    env.llm.on("decide_facts", decisions((0, "UPDATE", 0, said)))
    run_id = env.new_run(ALICE_CHAT)
    run_fact_stages(env, run_id)
    assert env.llm.count("decide_facts") == 0   # nothing to compare with: the old fact has expired
    assert said in {f.content for f in env.live_facts()}
    assert env.store.facts.get_facts(["old"])[0].content == old_text   # not merged into
