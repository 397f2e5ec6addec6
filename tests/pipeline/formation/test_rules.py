"""Pure formation rules, table-driven: scopes, fact and reflection filters, dedup aliases."""

from __future__ import annotations

import pytest

from pipeline.errors import InvalidLLMAnswer
from pipeline.formation import candidates, dedup
from pipeline.formation.consolidation import due_by_threshold, merge_order, scope_of_key
from pipeline.formation.facts import NewFact, filter_facts
from pipeline.formation.reflections import filter_reflections
from pipeline.formation.scopes import plan_from_dict, plan_scopes, plan_to_dict
from pipeline.text import text_hash
from schemas.documents import AgentSettings

from testkit.formation import decisions, facts, reflections


@pytest.mark.parametrize("user_on,agent_on,users,group,fact_scopes,refl_scopes", [
    (True, True, ["u1"], False, ("agent", "user"), ("agent", "user", "session")),
    (True, True, ["u1", "u2"], False, ("agent",), ("agent", "session")),
    (True, True, ["u1"], True, ("agent",), ("agent", "session")),
    (False, True, ["u1"], False, ("agent",), ("agent", "session")),
    (True, False, ["u1"], False, ("user",), ("user", "session")),
    (False, False, ["u1"], False, (), ("session",)),
    (True, False, ["u1", "u2"], False, (), ("session",)),
    (True, True, [], False, ("agent",), ("agent", "session")),
])
def test_scopes_follow_toggles_and_group_chat(user_on, agent_on, users, group, fact_scopes, refl_scopes):
    agent = AgentSettings(agent_id="a", user_memory_enabled=user_on, agent_memory_enabled=agent_on)
    plan = plan_scopes(agent, "s", users, group)
    assert (plan.fact_scopes, plan.reflection_scopes) == (fact_scopes, refl_scopes)
    assert plan.extract_facts == bool(fact_scopes)
    assert plan_from_dict(plan_to_dict(plan)) == plan


def _plan(group=False):
    return plan_scopes(AgentSettings(agent_id="a"), "s", ["u1", "u2"] if group else ["u1"], group)


@pytest.mark.parametrize("items,kept,counts", [
    ([("user", "Alice lives in Hamburg")], ["Alice lives in Hamburg"], {"kept": 1}),
    ([("user", "w " * 31)], [], {"over_limit": 1}),
    ([("user", "w " * 30)], ["w " * 29 + "w"], {"kept": 1}),
    ([("user", "A is B"), ("user", "a  IS b.")], ["A is B"], {"repeated": 1}),
    ([("user", "A is B"), ("agent", "A is B")], ["A is B", "A is B"], {"kept": 2}),
    ([("user", "   ")], [], {"empty": 1}),
])
def test_fact_filter_drops_and_counts(items, kept, counts):
    result = filter_facts(facts(*items).facts, _plan(), 30)
    assert [f.text for f in result.kept] == kept
    assert [f.index for f in result.kept] == list(range(len(kept)))
    for key, value in counts.items():
        assert result.counts()[key] == value


def test_group_chat_user_facts_are_dropped_not_rescoped():
    result = filter_facts(facts(("user", "Bob lives in Oslo"), ("agent", "The venue is Riverside")).facts, _plan(True), 30)
    assert [(f.scope, f.text) for f in result.kept] == [("agent", "The venue is Riverside")]
    assert result.scope_not_allowed == 1


def _new(i, text, key="user:u1"):
    return NewFact(i, text, "user", key, text_hash(text))


def _cands(*pairs):
    return [candidates.Candidate(fid, text, 0.9) for fid, text in pairs]


def test_batch_aliases_share_one_space_and_skip_facts_without_candidates():
    new = [_new(0, "a"), _new(1, "b"), _new(2, "c")]
    batch = dedup.build_batch(new, {0: _cands(("f1", "A"), ("f2", "B")), 1: [], 2: _cands(("f2", "B"))})
    assert batch.indexes == [0, 2]
    assert batch.candidates == {0: [(0, "A"), (1, "B")], 1: [(1, "B")]}
    assert batch.alias_ids == {0: "f1", 1: "f2"}


@pytest.mark.parametrize("answer,problem", [
    (decisions((0, "UPDATE", 1, "x")), "not one of its candidates"),
    (decisions((0, "DELETE")), "names no existing fact"),
    (decisions((0, "ADD"), (0, "NONE")), "more than one decision"),
    (decisions((5, "ADD")), "not in the batch"),
    (decisions(), "no decision for new fact"),
    (decisions((0, "UPDATE", 0, " ")), "no merged text"),
])
def test_invalid_decisions_are_rejected_with_the_reason(answer, problem):
    batch = dedup.build_batch([_new(0, "a")], {0: _cands(("f1", "A"))})
    with pytest.raises(InvalidLLMAnswer, match=problem):
        dedup.validate(answer, batch)


def test_decisions_become_idempotent_effects():
    new = [_new(0, "a0"), _new(1, "a1"), _new(2, "a2"), _new(3, "a3"), _new(4, "a4")]
    cands = {i: _cands(("f1", "A")) for i in range(4)}
    batch = dedup.build_batch(new[:4], cands)
    decided = dedup.validate(decisions((0, "UPDATE", 0, "merged"), (1, "UPDATE", 0, "again"), (2, "NONE"),
                                       (3, "ADD")), batch)
    resolved = dedup.resolve(new, {4: "f9"}, batch, decided, 30)
    # the second UPDATE of f1 carries the update (said last); the first is merged into it
    assert [(d.action, d.reason) for d in resolved.decisions] == [
        ("NONE", "merged_into_later_update"), ("UPDATE", "llm"), ("NONE", "llm"), ("ADD", "llm"), ("NONE", "exact")]
    effects = dedup.plan_effects("run-7", new, resolved.decisions)
    assert [(e["op"], e["fact_id"], e.get("text")) for e in effects] == [
        ("update", "f1", "again"), ("insert", "run-7:3", "a3")]
    assert dedup.action_counts(resolved.decisions) == {"added": 1, "updated": 1, "deleted": 0, "none": 3}


def test_delete_retires_then_inserts_and_an_over_long_update_becomes_an_add():
    new = [_new(0, "a0"), _new(1, "a1")]
    batch = dedup.build_batch(new, {0: _cands(("f1", "A")), 1: _cands(("f2", "B"))})
    decided = dedup.validate(decisions((0, "DELETE", 0), (1, "UPDATE", 1, "w " * 31)), batch)
    resolved = dedup.resolve(new, {}, batch, decided, 30)
    assert resolved.update_over_limit == 1
    effects = dedup.plan_effects("r", new, resolved.decisions)
    assert [(e["op"], e["fact_id"]) for e in effects] == [("retire", "f1"), ("insert", "r:0"), ("insert", "r:1")]


def test_reflection_filter_keeps_the_hierarchy_and_drops_repeats():
    answer = reflections(agent=["Team ships Fridays"], user=["team ships fridays.", "Alice likes tea", "w " * 36],
                         session=["Alice likes tea", "Alice's email is a@b.c", "Draft the plan"])
    result = filter_reflections("r", answer, _plan(), 35, ["Alice's email is a@b.c"])
    assert [(r.reflection_id, r.scope_key, r.text) for r in result.kept] == [
        ("r:agent:0", "agent", "Team ships Fridays"), ("r:user:0", "user:u1", "Alice likes tea"),
        ("r:session:0", "session:s", "Draft the plan")]
    assert (result.repeated, result.over_limit, result.repeats_fact) == (2, 1, 1)


@pytest.mark.parametrize("counts,due", [
    ({"agent": 10, "user:u": 3, "session:s": 4}, ["agent", "session:s"]),
    ({"agent": 9, "user:u": 4, "session:s": 0}, ["user:u"]),
])
def test_due_by_threshold(counts, due):
    assert due_by_threshold(counts, {"agent": 10, "user": 4, "session": 4}) == due


def test_merge_order_puts_agent_then_users_then_sessions():
    assert merge_order(["session:s", "user:b", "agent", "user:a", "agent"]) == ["agent", "user:a", "user:b", "session:s"]
    assert scope_of_key("user:x:y") == "user"
