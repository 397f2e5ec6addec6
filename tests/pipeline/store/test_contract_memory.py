"""The store contract, part 2: agents, facts, reflections, blobs, leases, version stamps,
the context cache and erasure. Runs unchanged against every adapter."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pipeline.store.port import FactUpdate
from pipeline.trigger import ClaimRule
from pipeline.text import text_hash
from schemas.context import ContextBlock, ContextFact, ContextSection, Omitted
from schemas.documents import AgentSettings, CachedContext, ConsolidatedBlob, RejectedEvent, StageRecord
from testkit.documents import T0, at, fact, message, reflection, run


# ---------------------------------------------------------------------- agents -------------
def test_unknown_agent_gets_the_defaults_and_nothing_is_written(store):
    settings = store.ingest.get_agent_settings("new-agent")
    assert (settings.user_memory_enabled, settings.agent_memory_enabled) == (True, True)
    assert store.admin.dump_all()["agents"] == []


def test_agent_settings_are_replaced_by_the_latest_put(store):
    store.ingest.put_agent_settings(AgentSettings(agent_id="a1", name="Bot", user_memory_enabled=False))
    store.ingest.put_agent_settings(AgentSettings(agent_id="a1", name="Bot 2", agent_memory_enabled=False))
    got = store.ingest.get_agent_settings("a1")
    assert (got.name, got.user_memory_enabled, got.agent_memory_enabled) == ("Bot 2", True, False)


# ---------------------------------------------------------------------- facts --------------
def test_insert_fact_roundtrips_with_its_embedding(store):
    assert store.facts.insert_fact(fact("f1", "Alice lives in Lyon", user="u1", embedding=[0.5, -0.25, 1.0])) == (True, "f1")
    (got,) = store.facts.get_facts(["f1"])
    assert (got.content, got.scope, got.scope_key, got.user_id) == ("Alice lives in Lyon", "user", "user:u1", "u1")
    assert got.embedding == [0.5, -0.25, 1.0] and got.embedding_model == "m1"
    assert got.formed_at == T0 and got.version == 1


def test_same_hash_in_the_same_scope_key_returns_the_existing_fact(store):
    store.facts.insert_fact(fact("f1", "Alice lives in Lyon", user="u1"))
    assert store.facts.insert_fact(fact("f2", "alice lives in  LYON.", user="u1")) == (False, "f1")
    assert store.facts.insert_fact(fact("f1", "Something else", user="u1")) == (False, "f1")
    assert store.facts.insert_fact(fact("f3", "Alice lives in Lyon", user="u2")) == (True, "f3")
    assert store.facts.insert_fact(fact("f4", "Alice lives in Lyon", agent="a2", user="u1")) == (True, "f4")
    assert store.facts.count_facts("a1", "user:u1") == 1


def test_find_fact_by_hash(store):
    store.facts.insert_fact(fact("f1", "The office is in Paris"))
    assert store.facts.find_fact_by_hash("a1", "agent", text_hash("the office is in paris")).fact_id == "f1"
    assert store.facts.find_fact_by_hash("a1", "user:u1", text_hash("the office is in paris")) is None


def test_update_fact_keeps_history_and_applies_once_per_run(store):
    store.facts.insert_fact(fact("f1", "Alice works at Acme", user="u1", embedding=[1.0, 0.0]))
    new = "Alice works at Globex"
    kwargs = dict(content=new, hash=text_hash(new), embedding=[0.0, 1.0], embedding_model="m1", now=at(5))
    assert store.facts.update_fact("f1", FactUpdate(run_id="r1", **kwargs)) is True
    assert store.facts.update_fact("f1", FactUpdate(run_id="r1", **kwargs)) is False
    (got,) = store.facts.get_facts(["f1"])
    assert (got.content, got.version, got.embedding, got.hash) == (new, 2, [0.0, 1.0], text_hash(new))
    assert [(h.content, h.version, h.run_id, h.changed_at) for h in got.history] == [
        ("Alice works at Acme", 1, "r1", at(5))]
    assert store.facts.find_fact_by_hash("a1", "user:u1", text_hash(new)).fact_id == "f1"


def test_update_fact_refuses_a_retired_fact_and_a_hash_taken_in_the_scope(store):
    store.facts.insert_fact(fact("f1", "A is 1"))
    store.facts.insert_fact(fact("f2", "B is 2"))
    taken = dict(content="B is 2", hash=text_hash("B is 2"), embedding=None, embedding_model=None, now=at(1))
    assert store.facts.update_fact("f1", FactUpdate(run_id="r1", **taken)) is False
    assert store.facts.retire_fact("f2", at(2), "r1") is True
    new = dict(content="B is 3", hash=text_hash("B is 3"), embedding=None, embedding_model=None, now=at(3))
    assert store.facts.update_fact("f2", FactUpdate(run_id="r2", **new)) is False
    assert store.facts.update_fact("missing", FactUpdate(run_id="r2", **new)) is False


def test_update_and_retire_refuse_a_fact_changed_since_the_version_decided_on(store):
    store.facts.insert_fact(fact("f1", "Alice works at Acme"))
    one = dict(content="Alice works at Globex", hash=text_hash("Alice works at Globex"), embedding=None,
               embedding_model=None, now=at(1))
    assert store.facts.update_fact("f1", FactUpdate(run_id="r1", expected_version=1, **one)) is True
    two = dict(content="Alice works at Initech", hash=text_hash("Alice works at Initech"), embedding=None,
               embedding_model=None, now=at(2))
    assert store.facts.update_fact("f1", FactUpdate(run_id="r2", expected_version=1, **two)) is False
    assert store.facts.retire_fact("f1", at(3), "r3", expected_version=1) is False
    (got,) = store.facts.get_facts(["f1"])
    assert (got.content, got.version, got.retired_at) == ("Alice works at Globex", 2, None)
    assert store.facts.retire_fact("f1", at(4), "r3", expected_version=2) is True


def test_a_retired_fact_does_not_block_its_text_from_coming_back_as_a_new_fact(store):
    paris, berlin = "Alice lives in Paris", "Alice lives in Berlin"
    store.facts.insert_fact(fact("f-paris", paris, user="u1"))
    store.facts.insert_fact(fact("f-berlin", berlin, user="u1"))
    assert store.facts.retire_fact("f-paris", at(1), "r-move") is True
    assert store.facts.find_fact_by_hash("a1", "user:u1", text_hash(paris)) is None
    assert store.facts.retire_fact("f-berlin", at(2), "r-back") is True
    assert store.facts.insert_fact(fact("f-paris-again", paris, user="u1", formed=at(2))) == (True, "f-paris-again")
    assert store.facts.insert_fact(fact("f-paris-3", "alice lives in PARIS", user="u1")) == (False, "f-paris-again")
    assert [f.fact_id for f in store.facts.list_facts("a1", "user:u1")] == ["f-paris-again"]
    assert store.facts.find_fact_by_hash("a1", "user:u1", text_hash(paris)).fact_id == "f-paris-again"
    (old,) = store.facts.get_facts(["f-paris"])
    assert (old.content, old.retired_at, old.retired_by) == (paris, at(1), "r-move")
    assert sorted(f.fact_id for f in store.facts.list_facts("a1", include_retired=True)) == [
        "f-berlin", "f-paris", "f-paris-again"]


def test_a_rerun_of_an_insert_applies_nothing_twice_even_after_its_fact_was_retired(store):
    text = "The launch is on March 3"
    store.facts.insert_fact(fact("f1", text))
    store.facts.retire_fact("f1", at(1), "r1")
    assert store.facts.insert_fact(fact("f2", text)) == (True, "f2")
    assert store.facts.insert_fact(fact("f2", text)) == (False, "f2")
    store.facts.retire_fact("f2", at(2), "r2")
    assert store.facts.insert_fact(fact("f2", text)) == (False, "f2")
    assert store.facts.list_facts("a1") == [] and store.facts.get_facts(["f2"])[0].retired_at == at(2)


def test_update_fact_may_take_the_text_of_a_retired_fact(store):
    store.facts.insert_fact(fact("f1", "The budget is 10"))
    store.facts.insert_fact(fact("f2", "The budget is 20"))
    store.facts.retire_fact("f1", at(1), "r1")
    back = dict(content="The budget is 10", hash=text_hash("The budget is 10"), embedding=None,
                embedding_model=None, now=at(2))
    assert store.facts.update_fact("f2", FactUpdate(run_id="r2", **back)) is True
    assert store.facts.find_fact_by_hash("a1", "agent", text_hash("The budget is 10")).fact_id == "f2"


def test_retired_facts_leave_context_search_and_lists(store):
    store.facts.insert_fact(fact("f1", "Old budget is 10", embedding=[1.0, 0.0]))
    store.facts.insert_fact(fact("f2", "New budget is 20", embedding=[0.0, 1.0]))
    assert store.facts.retire_fact("f1", at(1), "r9") is True
    assert store.facts.retire_fact("f1", at(2), "r9") is False
    (got,) = store.facts.get_facts(["f1"])
    assert (got.retired_at, got.retired_by) == (at(1), "r9")
    assert [c.fact_id for c in store.facts.search_candidates("a1", ["agent"], "m1")] == ["f2"]
    assert [f.fact_id for f in store.facts.recent_facts("a1", ["agent"], T0, 10)] == ["f2"]
    assert [f.fact_id for f in store.facts.list_facts("a1")] == ["f2"]
    assert sorted(f.fact_id for f in store.facts.list_facts("a1", include_retired=True)) == ["f1", "f2"]
    assert store.facts.count_facts("a1", "agent") == 1


def test_the_scope_keys_holding_memory_are_those_with_a_live_fact_a_reflection_or_a_blob(store):
    store.facts.insert_fact(fact("f1", "agent fact"))
    store.facts.insert_fact(fact("f2", "Alice lives in Lyon", user="u1"))
    store.facts.insert_fact(fact("f3", "Bob moved", user="u2"))
    store.facts.retire_fact("f3", at(1), "r1")
    store.facts.insert_fact(fact("f4", "other agent", agent="a2", user="u9"))
    store.reflections.insert_reflections([reflection("r1", "Carol likes tea", user="u3")])
    store.blobs.save_blob(ConsolidatedBlob(agent_id="a1", scope="session", scope_key="session:s2", session_id="s2",
                                     consolidated_content="VERSION: 1", word_limit=300, version=1), expected_version=0)
    assert store.facts.memory_scope_keys("a1") == ["agent", "session:s2", "user:u1", "user:u3"]
    assert store.facts.memory_scope_keys("a2") == ["user:u9"]
    assert store.facts.memory_scope_keys("nobody") == []


def test_search_candidates_filter_by_agent_scope_and_model(store):
    store.facts.insert_fact(fact("f1", "agent fact", embedding=[0.5, 0.5]))
    store.facts.insert_fact(fact("f2", "user fact", user="u1", embedding=[0.25, 0.75]))
    store.facts.insert_fact(fact("f3", "other user", user="u2", embedding=[1.0, 0.0]))
    store.facts.insert_fact(fact("f4", "other agent", agent="a2", embedding=[1.0, 0.0]))
    store.facts.insert_fact(fact("f5", "old model", embedding=[1.0, 0.0], model="m0"))
    cands = {c.fact_id: c for c in store.facts.search_candidates("a1", ["agent", "user:u1"], "m1")}
    assert sorted(cands) == ["f1", "f2", "f5"]
    assert cands["f2"].embedding == [0.25, 0.75] and len(cands["f2"].embedding) == 2
    assert np.asarray(cands["f1"].embedding).tolist() == [0.5, 0.5]
    assert cands["f5"].embedding is None
    assert (cands["f2"].scope, cands["f2"].user_id, cands["f2"].content) == ("user", "u1", "user fact")
    assert cands["f1"].formed_at == T0
    assert all(c.embedding is None for c in store.facts.search_candidates("a1", ["agent"], None))
    assert store.facts.search_candidates("a1", [], "m1") == []


def test_search_candidates_read_the_content_its_former_texts_and_the_words_of_its_source_message(store):
    said = fact("home", "Maya lives in Lisbon", user="u1", embedding=[1.0, 0.0])
    store.facts.insert_fact(said.model_copy(update={"source_text": "Maya: I live in Lisbon, near the river"}))
    store.facts.insert_fact(fact("old", "Maya likes tea", user="u1", embedding=[0.0, 1.0]))  # stored without one
    texts = {c.fact_id: c.content for c in store.facts.search_candidates("a1", ["user:u1"], "m1")}
    assert texts == {"home": "Maya lives in Lisbon\nMaya: I live in Lisbon, near the river", "old": "Maya likes tea"}
    moved = "Maya moved to Porto"
    assert store.facts.update_fact("home", FactUpdate(
                             content=moved, hash=text_hash(moved), embedding=[1.0, 0.0], embedding_model="m1",
                             run_id="r2", now=at(60), source_text="Maya: I moved to Porto last weekend")) is True
    (candidate,) = [c for c in store.facts.search_candidates("a1", ["user:u1"], "m1") if c.fact_id == "home"]
    assert candidate.content == "Maya moved to Porto\nMaya lives in Lisbon\nMaya: I moved to Porto last weekend"
    (got,) = store.facts.get_facts(["home"])
    assert (got.content, got.source_text) == (moved, "Maya: I moved to Porto last weekend")


def test_recent_facts_newest_first_since_and_limited(store):
    for i in range(5):
        store.facts.insert_fact(fact(f"f{i}", f"fact {i}", formed=at(i * 60)))
    assert [f.fact_id for f in store.facts.recent_facts("a1", ["agent"], at(60), 3)] == ["f4", "f3", "f2"]
    assert [f.fact_id for f in store.facts.list_facts("a1", "agent", limit=2)] == ["f4", "f3"]


def test_labelled_facts_hold_a_label_of_every_group_and_follow_a_refiling_and_a_retirement(store):
    def filed(fact_id, categories, metadata, *, user=None, minutes=0):
        f = fact(fact_id, f"fact {fact_id}", user=user, formed=at(minutes * 60))
        return f.model_copy(update={"categories": categories, "metadata": metadata})

    store.facts.insert_fact(filed("f1", ["travel"], {"project": "apollo", "tier": 2}))
    store.facts.insert_fact(filed("f2", ["finance"], {"project": ["apollo", "zeus"]}, minutes=1))
    store.facts.insert_fact(filed("f3", ["travel"], {"project": "zeus"}, user="u1", minutes=2))
    both = ["agent", "user:u1"]
    assert store.facts.labelled_fact_ids("a1", both, [["category:travel"]]) == {"f1", "f3"}
    assert store.facts.labelled_fact_ids("a1", ["agent"], [["category:travel"]]) == {"f1"}
    assert store.facts.labelled_fact_ids("a1", both, [['meta:project="apollo"', 'meta:project="zeus"']]) == \
        {"f1", "f2", "f3"}
    assert store.facts.labelled_fact_ids("a1", both, [["category:travel"], ['meta:project="zeus"']]) == {"f3"}
    assert store.facts.labelled_fact_ids("a1", both, [["meta:tier=2"]]) == {"f1"}
    assert store.facts.labelled_fact_ids("a1", both, [['meta:tier="2"']]) == set()
    assert store.facts.labelled_fact_ids("a2", both, [["category:travel"]]) == set()
    recent = store.facts.recent_facts("a1", both, at(0), None, having=[["category:travel"]])
    assert [f.fact_id for f in recent] == ["f3", "f1"]
    (f1,) = store.facts.get_facts(["f1"])
    assert store.facts.update_fact("f1", FactUpdate(content="fact f1 again", hash=text_hash("fact f1 again"),
                                                    embedding=None, embedding_model=None, run_id="r-refile",
                                                    now=at(600), categories=["finance"]))
    assert store.facts.labelled_fact_ids("a1", both, [["category:travel"]]) == {"f3"}
    assert store.facts.labelled_fact_ids("a1", both, [["category:finance"]]) == {"f1", "f2"}
    assert store.facts.retire_fact("f2", at(700), "r-retire")
    assert store.facts.labelled_fact_ids("a1", both, [["category:finance"]]) == {"f1"}
    assert [f.fact_id for f in store.facts.recent_facts(
        "a1", both, at(0), None, include_retired=True, having=[["category:finance"]])] == ["f1"]


def test_recent_facts_follow_the_latest_change_so_an_old_fact_corrected_today_comes_first(store):
    month_ago = at(-30 * 86400)
    store.facts.insert_fact(fact("home", "Alice lives in city A", user="u1", formed=month_ago))
    store.facts.insert_fact(fact("pet", "Alice has a cat", user="u1", formed=at(0)))
    assert [f.fact_id for f in store.facts.recent_facts("a1", ["user:u1"], at(-7 * 86400), 10)] == ["pet"]
    moved = "Alice moved to city B"
    assert store.facts.update_fact("home", FactUpdate(
                             content=moved, hash=text_hash(moved), embedding=None, embedding_model=None,
                             run_id="r2", now=at(60), valid_from=at(30))) is True
    got = store.facts.recent_facts("a1", ["user:u1"], at(-7 * 86400), 10)
    assert [(f.fact_id, f.content, f.updated_at, f.formed_at) for f in got] == [
        ("home", moved, at(60), month_ago), ("pet", "Alice has a cat", at(0), at(0))]
    assert [f.fact_id for f in store.facts.recent_facts("a1", ["user:u1"], at(-7 * 86400), 1)] == ["home"]


def test_an_update_closes_the_old_versions_validity_and_opens_the_new_ones(store):
    store.facts.insert_fact(fact("home", "Alice lives in city A", user="u1", formed=at(0)).model_copy(
        update={"valid_from": at(-5)}))
    moved = "Alice moved to city B"
    store.facts.update_fact("home", FactUpdate(
                      content=moved, hash=text_hash(moved), embedding=None, embedding_model=None,
                      run_id="r2", now=at(100), valid_from=at(90)))
    (got,) = store.facts.get_facts(["home"])
    assert (got.valid_from, got.valid_to, got.updated_at) == (at(90), None, at(100))
    assert [(h.content, h.valid_from, h.valid_to, h.changed_at) for h in got.history] == [
        ("Alice lives in city A", at(-5), at(90), at(100))]


def test_a_retired_fact_keeps_when_it_stopped_being_valid(store):
    store.facts.insert_fact(fact("f1", "The launch is on March 3", formed=at(10)))
    store.facts.insert_fact(fact("f2", "The venue is Hall A", formed=at(10)))
    assert store.facts.retire_fact("f1", at(100), "r2", valid_to=at(50)) is True
    assert store.facts.retire_fact("f2", at(100), "r2", valid_to=at(-50)) is True  # never before valid_from
    f1, f2 = store.facts.get_facts(["f1", "f2"])
    assert (f1.valid_from, f1.valid_to, f1.retired_at) == (at(10), at(50), at(100))
    assert f2.valid_to == at(10)
    assert store.facts.recent_facts("a1", ["agent"], T0, 10) == []
    assert sorted(f.fact_id for f in store.facts.recent_facts("a1", ["agent"], T0, None, include_retired=True)) == [
        "f1", "f2"]


def test_recent_fact_ids_are_the_scope_keys_live_facts_of_the_model_formed_in_the_window(store):
    store.facts.insert_fact(fact("old", "formed before the window", embedding=[1.0, 0.0], formed=at(0)))
    for i in range(1, 4):
        store.facts.insert_fact(fact(f"f{i}", f"fact {i}", embedding=[1.0, 0.0], formed=at(100 + i)))
    store.facts.insert_fact(fact("user", "a user fact", user="u1", embedding=[1.0, 0.0], formed=at(101)))
    store.facts.insert_fact(fact("other-agent", "another agent", agent="a2", embedding=[1.0, 0.0], formed=at(101)))
    store.facts.insert_fact(fact("other-model", "another model", embedding=[1.0, 0.0], model="m0", formed=at(101)))
    store.facts.insert_fact(fact("no-vector", "not embedded", formed=at(101)))
    store.facts.insert_fact(fact("retired", "retired since", embedding=[1.0, 0.0], formed=at(101)))
    store.facts.retire_fact("retired", at(102), "r1")
    assert store.facts.recent_fact_ids("a1", "agent", "m1", at(100), 10) == ["f3", "f2", "f1"]
    assert store.facts.recent_fact_ids("a1", "agent", "m1", at(100), 2) == ["f3", "f2"]
    assert store.facts.recent_fact_ids("a1", "agent", "m1", at(103), 10) == ["f3"]
    assert store.facts.recent_fact_ids("a1", "user:u1", "m1", at(100), 10) == ["user"]
    assert store.facts.recent_fact_ids("a1", "agent", "m1", at(200), 10) == []


def test_record_fact_access_counts_each_hit(store):
    store.facts.insert_fact(fact("f1", "x is y"))
    store.facts.record_fact_access(["f1"], at(1))
    store.facts.record_fact_access(["f1", "missing"], at(2))
    (got,) = store.facts.get_facts(["f1"])
    assert (got.access_count, got.last_accessed_at) == (2, at(2))


def test_reembed_batches_cover_every_live_fact_of_other_models(store):
    for i in range(5):
        store.facts.insert_fact(fact(f"f{i}", f"fact {i}", embedding=[float(i)], model="old"))
    store.facts.insert_fact(fact("g1", "already new", embedding=[1.0], model="new"))
    store.facts.insert_fact(fact("g2", "no vector yet"))
    store.facts.insert_fact(fact("h1", "other agent", agent="a2", embedding=[1.0], model="old"))
    store.facts.retire_fact("f4", at(1), "r1")
    seen = []
    for batch in store.facts.iter_facts_for_reembed("a1", "new", 2):
        assert len(batch) <= 2
        for f in batch:
            seen.append(f.fact_id)
            store.facts.set_fact_embedding(f.fact_id, [0.5, 0.5], "new")
    assert sorted(seen) == ["f0", "f1", "f2", "f3", "g2"]
    assert list(store.facts.iter_facts_for_reembed("a1", "new", 2)) == []
    assert store.facts.get_facts(["f0"])[0].embedding == [0.5, 0.5]
    assert [f.fact_id for batch in store.facts.iter_facts_for_reembed(None, "new", 10) for f in batch] == ["h1"]


def test_get_facts_keeps_the_requested_order_and_skips_unknown_ids(store):
    for i in range(3):
        store.facts.insert_fact(fact(f"f{i}", f"fact {i}"))
    assert [f.fact_id for f in store.facts.get_facts(["f2", "zz", "f0"])] == ["f2", "f0"]


# ---------------------------------------------------------------------- reflections --------
def test_insert_reflections_is_idempotent_by_id(store):
    batch = [reflection("r1", "likes tea", formed=at(1)), reflection("r2", "short answers", formed=at(2))]
    assert store.reflections.insert_reflections(batch) == 2
    assert store.reflections.insert_reflections([batch[0], reflection("r3", "Spanish", formed=at(3))]) == 1
    assert [r.reflection_id for r in store.reflections.unabsorbed_reflections("a1", "user:u1")] == ["r1", "r2", "r3"]
    assert [r.reflection_id for r in store.reflections.unabsorbed_reflections("a1", "user:u1", limit=2)] == ["r1", "r2"]


def test_mark_absorbed_marks_exactly_those_ids(store):
    store.reflections.insert_reflections([reflection(f"r{i}", f"item {i}", formed=at(i)) for i in range(4)])
    store.reflections.insert_reflections([reflection("s1", "session goal", scope="session", user=None)])
    assert store.reflections.mark_absorbed(["r0", "r2", "missing"], 3, at(10)) == 2
    assert store.reflections.mark_absorbed(["r0"], 4, at(11)) == 0
    assert [r.reflection_id for r in store.reflections.unabsorbed_reflections("a1", "user:u1")] == ["r1", "r3"]
    absorbed = {r.reflection_id: r for r in store.reflections.list_reflections("a1", "user:u1")}
    assert (absorbed["r0"].absorbed, absorbed["r0"].absorbed_at, absorbed["r0"].consolidated_into) == (True, at(10), 3)
    assert sorted(r.reflection_id for r in store.reflections.list_reflections("a1", "user:u1", include_absorbed=False)) == [
        "r1", "r3"]
    assert store.reflections.count_unabsorbed("a1", ["user:u1", "session:s1", "agent"]) == {
        "user:u1": 2, "session:s1": 1, "agent": 0}


# ---------------------------------------------------------------------- blobs & leases -----
def _blob(version: int, text: str) -> ConsolidatedBlob:
    return ConsolidatedBlob(agent_id="a1", scope="user", scope_key="user:u1", user_id="u1",
                            consolidated_content=text, word_limit=300, version=version,
                            last_consolidated_at=at(version))


def test_save_blob_is_compare_and_set_on_version(store):
    assert store.blobs.get_blob("a1", "user:u1") is None
    assert store.blobs.save_blob(_blob(1, "VERSION: 1"), expected_version=0) is True
    assert store.blobs.save_blob(_blob(1, "VERSION: 1 (racer)"), expected_version=0) is False
    assert store.blobs.save_blob(_blob(2, "VERSION: 2"), expected_version=1) is True
    assert store.blobs.save_blob(_blob(3, "VERSION: 3"), expected_version=1) is False
    got = store.blobs.get_blob("a1", "user:u1")
    assert (got.version, got.consolidated_content, got.last_consolidated_at) == (2, "VERSION: 2", at(2))


def test_lease_is_held_by_one_holder_until_released_or_expired(store):
    assert store.leases.acquire_lease("consolidate:a1:user:u1", "w1", at(0), 30) is True
    assert store.leases.acquire_lease("consolidate:a1:user:u1", "w2", at(10), 30) is False
    assert store.leases.acquire_lease("consolidate:a1:user:u1", "w1", at(10), 30) is True
    assert store.leases.acquire_lease("consolidate:a1:user:u1", "w2", at(41), 30) is True
    store.leases.release_lease("consolidate:a1:user:u1", "w1")  # not the holder: no effect
    assert store.leases.acquire_lease("consolidate:a1:user:u1", "w3", at(42), 30) is False
    store.leases.release_lease("consolidate:a1:user:u1", "w2")
    assert store.leases.acquire_lease("consolidate:a1:user:u1", "w3", at(43), 30) is True


# ---------------------------------------------------------------------- versions & cache ----
def test_scope_versions_start_at_zero_and_count_bumps_per_agent(store):
    assert store.leases.get_scope_versions("a1", ["agent", "user:u1"]) == {"agent": 0, "user:u1": 0}
    store.leases.bump_scope_versions("a1", ["agent", "user:u1"])
    store.leases.bump_scope_versions("a1", ["agent"])
    assert store.leases.get_scope_versions("a1", ["agent", "user:u1"]) == {"agent": 2, "user:u1": 1}
    assert store.leases.get_scope_versions("a2", ["agent"]) == {"agent": 0}


def test_context_cache_is_kept_per_session_and_user(store):
    assert store.contexts.get_cached_context("s1", "u.1$") is None
    first = CachedContext(session_id="s1", user_id="u.1$", agent_id="a1", content=_block("v1"), built_at=at(1),
                          versions={"agent": 1, "user:u.1$": 2})
    store.contexts.put_cached_context(first)
    store.contexts.put_cached_context(first.model_copy(update={"user_id": "", "content": _block("x")}))
    store.contexts.put_cached_context(first.model_copy(update={"content": _block("v2"), "built_at": at(2)}))
    got = store.contexts.get_cached_context("s1", "u.1$")
    assert (got.content, got.built_at, got.versions) == (_block("v2"), at(2), {"agent": 1, "user:u.1$": 2})
    assert store.contexts.get_cached_context("s1", "").content == _block("x")


def _block(text: str) -> ContextBlock:
    return ContextBlock(sections={"agent": ContextSection(consolidated=text, recent_reflections=["r"])},
                        facts=[ContextFact(scope="user", text=text, age="3h ago")], omitted=Omitted(facts=2))


# ---------------------------------------------------------------------- erasure ------------
def _populate(store, user: str, other: str) -> None:
    secret = f"my passport number is P-{user}"
    store.ingest.ingest_message(message(1, session="s-gone", user=user, content=secret), at(1))
    store.ingest.ingest_message(message(2, session="s-gone", role="assistant", users=[user],
                                 content="noted your passport P-xyz"), at(2))
    store.ingest.ingest_message(message(1, session="s-kept", user=other, content=f"I am {other}"), at(1))
    store.runs.try_claim("s-gone", ClaimRule(min_messages=1), run("r-gone", session="s-gone"), at(3), 60)
    store.runs.try_claim("s-kept", ClaimRule(min_messages=1), run("r-kept", session="s-kept"), at(3), 60)
    store.facts.insert_fact(fact("f-gone", f"{user} holds passport P-1", user=user))
    store.facts.insert_fact(fact("f-kept", f"{other} likes jazz", user=other))
    store.facts.insert_fact(fact("f-agent", "The festival budget is 50k"))
    store.reflections.insert_reflections([
        reflection("x-gone", "wants brevity", user=user), reflection("x-kept", "wants detail", user=other),
        reflection("x-sess", "pin the passport form", scope="session", user=None, session="s-gone"),
    ])
    store.blobs.save_blob(ConsolidatedBlob(agent_id="a1", scope="user", scope_key=f"user:{user}", user_id=user,
                                     consolidated_content="VERSION: 1", word_limit=300, version=1), 0)
    store.leases.bump_scope_versions("a1", [f"user:{user}", f"user:{other}"])
    store.contexts.put_cached_context(CachedContext(session_id="s-gone", user_id=user, agent_id="a1", content=_block("x"),
                                           built_at=at(5), versions={f"user:{user}": 1}))
    store.contexts.put_cached_context(CachedContext(session_id="s-kept", user_id=other, agent_id="a1", content=_block("y"),
                                           built_at=at(5)))
    store.ingest.record_rejection(RejectedEvent(rejection_id="rej-gone", raw=json.dumps({"sender_id": user}),
                                         errors=[{"field": "x", "reason": "y"}], received_at=at(6)))
    store.ingest.record_rejection(RejectedEvent(rejection_id="rej-kept", raw=json.dumps({"sender_id": other}),
                                         errors=[{"field": "x", "reason": "y"}], received_at=at(6)))
    store.leases.acquire_lease(f"consolidate:a1:user:{user}", "w1", at(7), 30)


@pytest.mark.parametrize("user", ["user-7f3a", "odd.user$id"])
def test_forget_user_removes_everything_of_that_user_and_nothing_of_others(store, user):
    other = "other-9c1d"
    _populate(store, user, other)
    before = store.admin.dump_all()
    counts = store.admin.forget_user(user)
    assert counts["facts"] == 1 and counts["reflections"] == 2 and counts["consolidated"] == 1
    dump = json.dumps(store.admin.dump_all(), default=str)
    for leftover in (user, f"my passport number is P-{user}", "noted your passport", "pin the passport form"):
        assert leftover not in dump
    after = store.admin.dump_all()
    assert [f["fact_id"] for f in after["facts"]] == [f["fact_id"] for f in before["facts"] if f["fact_id"] != "f-gone"]
    assert [r["reflection_id"] for r in after["reflections"]] == ["x-kept"]
    assert store.ingest.get_messages("s-kept", 1, 1)[0].content == f"I am {other}"
    assert store.runs.get_run("r-kept") is not None
    # r-gone was in flight: it stays, emptied and ended ``erased``, so its stage applies nothing
    erased = store.runs.get_run("r-gone")
    assert (erased.status, erased.user_ids, erased.stages) == ("erased", [], {})
    assert store.runs.reopen_run("r-gone", at(9), 60) is None
    assert store.contexts.get_cached_context("s-kept", other).content == _block("y")
    assert [r.rejection_id for r in store.ingest.list_rejections()] == ["rej-kept"]
    assert store.leases.get_scope_versions("a1", [f"user:{other}"]) == {f"user:{other}": 1}
    assert store.ingest.get_session("s-kept").users == [other]
    assert store.ingest.get_session("s-gone").users == []


def test_forget_user_under_one_agent_keeps_their_memory_of_other_agents(store):
    store.facts.insert_fact(fact("f1", "u1 fact at a1", user="u1"))
    store.facts.insert_fact(fact("f2", "u1 fact at a2", user="u1", agent="a2"))
    store.reflections.insert_reflections([reflection("x1", "r at a1"), reflection("x2", "r at a2", agent="a2")])
    store.admin.forget_user("u1", agent_id="a1")
    assert store.facts.list_facts("a1") == [] and [f.fact_id for f in store.facts.list_facts("a2")] == ["f2"]
    assert [r.reflection_id for r in store.reflections.list_reflections("a2", "user:u1")] == ["x2"]


def test_forget_user_makes_caches_of_the_agent_stale(store):
    store.leases.bump_scope_versions("a1", ["agent", "user:u1"])
    store.admin.forget_user("u1")
    assert store.leases.get_scope_versions("a1", ["agent"]) == {"agent": 2}


def test_search_candidates_of_mixed_dimensions_keep_each_vector(store):
    store.facts.insert_fact(fact("f1", "short vector", embedding=[0.5, 0.5]))
    store.facts.insert_fact(fact("f2", "long vector", embedding=[0.25, 0.5, 1.0]))
    store.facts.insert_fact(fact("f3", "no vector"))
    cands = {c.fact_id: c.embedding for c in store.facts.search_candidates("a1", ["agent"], "m1")}
    assert cands == {"f1": [0.5, 0.5], "f2": [0.25, 0.5, 1.0], "f3": None}


def _group_chat(store, gone: str, other: str) -> None:
    both = [gone, other]
    store.ingest.ingest_message(message(1, session="s-grp", user=gone, users=both, content="I will bring the cake KIWI-7"), at(1))
    store.ingest.ingest_message(message(2, session="s-grp", user=other, users=both, content="I bring the projector"), at(2))
    store.ingest.ingest_message(message(3, session="s-grp", role="assistant", users=both, content="Great, see you both"), at(3))
    store.runs.try_claim("s-grp", ClaimRule(min_messages=1), run("r-grp-done", session="s-grp"), at(4), 60)
    store.runs.finish_run("r-grp-done", at(4), {}, [])
    store.ingest.ingest_message(message(4, session="s-grp", user=other, users=both, content="The picnic is at noon"), at(5))
    store.runs.try_claim("s-grp", ClaimRule(min_messages=1), run("r-grp-live", session="s-grp"), at(6), 60)
    store.runs.start_stage("r-grp-live", "extract_facts", at(6))
    store.runs.complete_stage("r-grp-live", "extract_facts", StageRecord(
        status="done", output={"facts": [{"text": "brings the cake KIWI-7"}]}, started_at=at(6), finished_at=at(6)))
    store.ingest.ingest_message(message(1, session="s-solo", user=gone, content="My PIN is 4417-LYNX"), at(1))
    store.ingest.ingest_message(message(2, session="s-solo", role="assistant", users=[gone], content="Stored 4417-LYNX"), at(2))
    store.reflections.insert_reflections([
        reflection("x-grp", "The group plans a picnic", scope="session", user=None, session="s-grp"),
        reflection("x-solo", "Pin the PIN 4417-LYNX", scope="session", user=None, session="s-solo"),
    ])
    for session in ("s-grp", "s-solo"):
        store.blobs.save_blob(ConsolidatedBlob(agent_id="a1", scope="session", scope_key=f"session:{session}",
                                         consolidated_content=f"VERSION: 1\n[{session}]", word_limit=200, version=1), 0)


def test_forget_user_in_a_group_chat_keeps_what_the_others_said_and_the_group_memory(store):
    gone, other = "user-7f3a", "other-9c1d"
    _group_chat(store, gone, other)
    store.admin.forget_user(gone)
    dump = json.dumps(store.admin.dump_all(), default=str)
    for leftover in (gone, "KIWI-7", "4417-LYNX"):
        assert leftover not in dump
    kept = store.ingest.get_messages("s-grp", 1, 10)
    assert [(m.role, m.content) for m in kept] == [
        ("user", "I bring the projector"), ("assistant", "Great, see you both"), ("user", "The picnic is at noon")]
    assert all(m.session_users == [other] for m in kept)
    assert store.ingest.get_session("s-grp").users == [other]
    assert [r.reflection_id for r in store.reflections.list_reflections("a1", "session:s-grp")] == ["x-grp"]
    assert store.blobs.get_blob("a1", "session:s-grp").consolidated_content == "VERSION: 1\n[s-grp]"


def test_forget_user_deletes_a_one_to_one_session_whole_replies_included(store):
    gone, other = "user-7f3a", "other-9c1d"
    _group_chat(store, gone, other)
    counts = store.admin.forget_user(gone)
    assert store.ingest.count_messages("s-solo") == 0 and store.ingest.get_session("s-solo").users == []
    assert store.reflections.list_reflections("a1", "session:s-solo") == [] and store.blobs.get_blob("a1", "session:s-solo") is None
    assert counts["messages_deleted"] >= 3 and counts["reflections"] == 1 and counts["consolidated"] == 1


def test_forget_user_deletes_finished_group_runs_and_reforms_an_unfinished_one_without_them(store):
    gone, other = "user-7f3a", "other-9c1d"
    _group_chat(store, gone, other)
    store.admin.forget_user(gone)
    assert store.runs.get_run("r-grp-done") is None
    live = store.runs.get_run("r-grp-live")
    assert (live.status, live.user_ids, live.stages, live.group_chat) == ("failed", [other], {}, True)
    assert store.ingest.get_session("s-grp").active_run_id is None
    assert [r.run_id for r in store.runs.find_stale_runs(at(7), 10)] == ["r-grp-live"]
    reopened = store.runs.reopen_run("r-grp-live", at(7), 60)
    assert (reopened.status, reopened.seq_from, reopened.seq_to) == ("claimed", 4, 4)
    assert store.ingest.get_session("s-grp").active_run_id == "r-grp-live"


def test_list_facts_pages_newest_first_with_an_offset(store):
    for i in range(7):
        store.facts.insert_fact(fact(f"f{i}", f"The launch checklist item number {i}", formed=at(i)))
    store.facts.retire_fact("f3", at(9), "r9")
    newest = ["f6", "f5", "f4", "f2", "f1", "f0"]
    pages = [[f.fact_id for f in store.facts.list_facts("a1", "agent", limit=4, offset=o)] for o in (0, 4, 8)]
    assert pages == [newest[:4], newest[4:], []]
    assert [f.fact_id for f in store.facts.list_facts("a1", offset=5)] == newest[5:]
