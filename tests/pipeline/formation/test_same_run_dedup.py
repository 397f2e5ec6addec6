"""New facts of one run are deduplicated against each other, by the same content rule as
against stored facts (design §11 "Formation details"): before, two near-duplicates said in one
conversation were both added, because neither was stored when the other was decided."""

from __future__ import annotations

from pipeline import vectors
from pipeline.formation import finish, stages
from pipeline.llm.offline import OfflineLLM

from testkit.formation import decisions, facts

LYON = "Alice lives in Lyon"
LYON_MORE = "Alice lives in Lyon, France"
CHAT = [("user", "u-1", "I live in Lyon. Lyon, France, that is."), ("assistant", None, "Nice city.")]


def _form(env, *texts: str, answer=None) -> str:
    env.llm.on("extract_facts", facts(*(("user", t) for t in texts)), times=1)
    if answer is not None:
        env.llm.on("decide_facts", answer, times=1)
    run_id = env.new_run(CHAT)
    for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts):
        assert stage(run_id, env) is not None
    return run_id


def _same_run(env, run_id) -> dict:
    return finish.run_totals(env.store.runs.get_run(run_id))["facts"]["same_run"]


def test_the_later_fact_is_decided_against_the_earlier_one_before_anything_is_stored(env):
    run_id = _form(env, LYON, LYON_MORE, answer=decisions((0, "NONE")))
    [call] = [c for c in env.llm.calls if c.operation == "decide_facts"]
    assert call.inputs["items"] == [{"new": 0, "text": LYON_MORE, "candidates": [{"alias": 0, "text": LYON}]}]
    assert [f.content for f in env.live_facts()] == [LYON]
    assert _same_run(env, run_id) == {"dropped": 1, "merged": 0, "superseded": 0}
    decided = env.store.runs.get_run(run_id).stages["decide_facts"].output["decisions"]
    assert [(d["action"], d["reason"]) for d in decided] == [("ADD", "no_candidates"), ("NONE", "same_run_duplicate")]


def test_an_update_merges_the_later_fact_into_the_earlier_one_which_is_added_merged(env):
    merged = "Alice lives in Lyon, France, near the old town"
    run_id = _form(env, LYON, LYON_MORE, answer=decisions((0, "UPDATE", 0, merged)))
    [fact] = env.live_facts()
    assert (fact.fact_id, fact.content, fact.version) == (f"{run_id}:0", merged, 1)
    # embedded as merged, like an UPDATE's text, not with the earlier fact's own vector
    first_vector = env.store.runs.get_run(run_id).stages["embed_facts"].output["vectors"]
    assert vectors.unpack(first_vector, env.embedder.dim)[0] != fact.embedding
    assert _same_run(env, run_id) == {"dropped": 0, "merged": 1, "superseded": 0}


def test_a_delete_leaves_the_earlier_fact_out_and_adds_the_later(env):
    later = "Alice no longer lives in Lyon"
    run_id = _form(env, LYON, later, answer=decisions((0, "DELETE", 0)))
    assert [f.content for f in env.all_facts()] == [later]
    assert _same_run(env, run_id) == {"dropped": 0, "merged": 0, "superseded": 1}


def test_an_add_keeps_both_and_counts_nothing(env):
    run_id = _form(env, LYON, LYON_MORE, answer=decisions((0, "ADD")))
    assert sorted(f.content for f in env.live_facts()) == [LYON, LYON_MORE]
    assert _same_run(env, run_id) == {"dropped": 0, "merged": 0, "superseded": 0}


def test_a_later_fact_merged_into_an_earlier_one_that_is_not_added_as_said_is_added(env):
    _form(env, LYON)
    later = "Alice lives in Lyon, France, by the park"

    def answer(request):
        items = {item["text"]: item for item in request.inputs["items"]}
        alias = {c["text"]: c["alias"] for item in items.values() for c in item["candidates"]}
        return decisions((items[LYON_MORE]["new"], "UPDATE", alias[LYON], LYON_MORE),
                         (items[later]["new"], "UPDATE", alias[LYON_MORE], "Alice lives by the park"))

    run_id = _form(env, LYON_MORE, later, answer=answer)
    # the earlier fact was merged into the stored one; the later one is added as it was said
    assert sorted(f.content for f in env.live_facts()) == [LYON_MORE, later]
    decided = env.store.runs.get_run(run_id).stages["decide_facts"].output["decisions"]
    assert [(d["action"], d["reason"]) for d in decided] == [("UPDATE", "llm"), ("ADD", "same_run_not_added")]
    assert _same_run(env, run_id) == {"dropped": 0, "merged": 0, "superseded": 0}


def test_a_merged_text_with_a_secret_adds_both_facts_as_said(env):
    run_id = _form(env, LYON, LYON_MORE, answer=decisions((0, "UPDATE", 0, "Alice lives in Lyon, password hunter2")))
    assert sorted(f.content for f in env.live_facts()) == [LYON, LYON_MORE]
    run = env.store.runs.get_run(run_id)
    assert run.stages["decide_facts"].output["update_secrets"] == 1
    assert _same_run(env, run_id) == {"dropped": 0, "merged": 0, "superseded": 0}


def test_facts_of_different_scope_keys_are_never_compared(env):
    env.llm.on("extract_facts", facts(("user", LYON), ("agent", LYON_MORE)), times=1)
    run_id = env.new_run(CHAT)
    for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts):
        stage(run_id, env)
    assert env.llm.count("decide_facts") == 0 and len(env.live_facts()) == 2


def test_offline_providers_keep_one_fact_of_a_repeated_statement(env):
    env.llm = OfflineLLM(env.settings)
    run_id = env.new_run([
        ("user", "u-1", "I live in Lyon."),
        ("assistant", None, "Nice."),
        ("user", "u-1", "I live in Lyon, France."),
        ("assistant", None, "Noted."),
    ])
    for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts):
        stage(run_id, env)
    extracted = env.store.runs.get_run(run_id).stages["extract_facts"].output["facts"]
    assert len(extracted) == 2, extracted  # the rules extract both statements
    assert len([f for f in env.live_facts() if "Lyon" in f.content]) == 1
    assert sum(_same_run(env, run_id).values()) == 1


def test_three_values_of_one_slot_in_one_run_leave_only_the_last_live(env):
    """"I live in Lyon", then "Porto", then "Nice" in one conversation: the second merges into
    the first, and the third must merge into that merged fact too, not be added beside it."""
    env.llm = OfflineLLM(env.settings)
    run_id = env.new_run([("user", "u-1", f"I live in {city}.") for city in ("Lyon", "Porto", "Nice")])
    for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts):
        stage(run_id, env)
    assert [f.content for f in env.live_facts()] == ["U-1 lives in Nice"]
    assert _same_run(env, run_id)["merged"] == 2



def test_two_corrections_of_a_stored_fact_in_one_run_leave_only_the_last_live(env):
    """"Lyon" stored; then "Porto" and "Nice" in one conversation both UPDATE it: the later
    statement carries the update, so Porto does not stay live beside Nice."""
    env.llm = OfflineLLM(env.settings)
    first = env.new_run([("user", "u-1", "I live in Lyon.")])
    for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts):
        stage(first, env)
    run_id = env.new_run([("user", "u-1", f"I live in {city}.") for city in ("Porto", "Nice")], session_id="s-2")
    for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts):
        stage(run_id, env)
    assert [f.content for f in env.live_facts()] == ["U-1 lives in Nice"]
    [fact] = env.live_facts()
    assert [h.content for h in fact.history] == ["U-1 lives in Lyon"]


def test_a_merged_fact_is_valid_from_its_latest_statement_and_keeps_every_source(env):
    """Two statements of one run merged into one text: the text holds what the later one said,
    so it is valid from then (a later run's older statement must not replace it), and both
    messages are its sources (an erasure of either speaker finds it)."""
    env.llm.on("extract_facts", facts(("user", "Alice lives in Lyon"), ("user", "Alice lives in Porto")), times=1)
    env.llm.on("decide_facts", decisions((0, "UPDATE", 0, "Alice lives in Porto")), times=1)
    run_id = env.new_run([("user", "u-1", "I live in Lyon."), ("assistant", None, "Nice city."),
                          ("user", "u-1", "Actually I live in Porto now."), ("assistant", None, "Noted.")])
    for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts):
        assert stage(run_id, env) is not None
    run = env.store.runs.get_run(run_id)
    lyon, _, porto, _ = env.store.ingest.get_messages(run.session_id, run.seq_from, run.seq_to)
    [fact] = env.live_facts()
    assert fact.content == "Alice lives in Porto" and fact.valid_from == porto.created_at
    assert set(fact.source_message_ids) == {lyon.message_id, porto.message_id}
    assert fact.source_text.endswith("Actually I live in Porto now.")
