"""Withdrawing one person's part of a shared item (design §13 "Owner controls"), on every adapter:
the ``withdraw_user`` port method and the use case over stored runs and messages."""

from __future__ import annotations

import pytest

from pipeline.store.port import FactUpdate
from pipeline.text import text_hash
from pipeline.withdrawal import WithdrawRefused
from schemas.documents import FormationRun, Reflection
from testkit.documents import T0, at, fact, message
from usecases.withdraw import NotWithdrawable, WithdrawIn, withdraw


def _said(store, n: int, user: str) -> None:
    store.ingest.ingest_message(message(n, user=user, users=["ann", "bob"], content=f"said {n} by {user}"), at(n))


def _run(store, run_id: str, first: int, last: int) -> None:
    store.runs.insert_run(FormationRun(run_id=run_id, agent_id="a1", session_id="s1", seq_from=first, seq_to=last,
                                  reason="threshold", created_at=T0, status="done", user_ids=["ann", "bob"]))


def _update(store, fact_id: str, text: str, run_id: str, mid: str, user: str, said: str) -> None:
    assert store.facts.update_fact(fact_id, FactUpdate(
        content=text, hash=text_hash(text), embedding=None, embedding_model=None, run_id=run_id, now=at(60),
        source_message_ids=[mid], source_user_ids=[user], source_text=said))


@pytest.fixture
def shared(store):
    """A venue fact Ann's message formed (run r1) and Bob's message corrected (run r2)."""
    _said(store, 1, "ann")
    _said(store, 2, "bob")
    _run(store, "r1", 1, 1)
    _run(store, "r2", 2, 2)
    first = fact("f1", "The venue is Quokka Hall").model_copy(update={
        "source_message_ids": ["m1"], "source_user_ids": ["ann"], "source_run_id": "r1",
        "source_text": "Ann: the venue is Quokka Hall"})
    store.facts.insert_fact(first)
    _update(store, "f1", "The venue is Okapi Hall", "r2", "m2", "bob", "Bob: no, Okapi Hall")
    return store


def _in(user: str, kind="fact", item="f1") -> WithdrawIn:
    return WithdrawIn(agent_id="a1", user_id=user, kind=kind, item_id=item, now=at(120))


def test_withdraw_takes_the_person_and_what_quotes_them_out_and_keeps_the_item(shared):
    out = withdraw(shared, _in("ann"))
    assert (out.messages_out, out.versions_out) == (1, 1)
    [kept] = shared.facts.get_facts(["f1"])
    assert kept.content == "The venue is Okapi Hall"
    assert kept.source_user_ids == ["bob"] and kept.source_message_ids == ["m2"]
    assert kept.history == [] and kept.source_text is None
    assert shared.provenance.resting_on("ann").facts == [] and "facts.source_user_ids" not in shared.provenance.footprint("ann").counts
    assert [f.fact_id for f in shared.provenance.resting_on("bob").facts] == ["f1"]
    # the stored search text no longer holds Ann's words (the old text, the source message)
    found = shared.facts.search_candidates("a1", ["agent"], None)
    assert "Quokka" not in repr(found)


def test_withdraw_is_refused_when_the_current_text_is_theirs_or_nobody_else_rests_on_it(shared):
    with pytest.raises(WithdrawRefused, match="current text .* your message, so it cannot stay without you"):
        withdraw(shared, _in("bob"))
    shared.facts.insert_fact(fact("f2", "Ann brings tea").model_copy(update={
        "source_message_ids": ["m1"], "source_user_ids": ["ann"], "source_run_id": "r1"}))
    with pytest.raises(WithdrawRefused, match="your messages alone: remove it instead"):
        withdraw(shared, _in("ann", item="f2"))
    with pytest.raises(NotWithdrawable):
        withdraw(shared, _in("carol"))
    [unchanged] = shared.facts.get_facts(["f1"])
    assert unchanged.source_user_ids == ["ann", "bob"] and len(unchanged.history) == 1


def test_a_text_whose_run_is_gone_counts_as_theirs(shared):
    shared.facts.insert_fact(fact("f3", "The stream starts at nine").model_copy(update={
        "source_message_ids": ["m1", "m2"], "source_user_ids": ["ann", "bob"], "source_run_id": "r-gone"}))
    with pytest.raises(WithdrawRefused, match="may have come"):
        withdraw(shared, _in("ann", item="f3"))


def test_a_pending_reflection_is_withdrawn_from_once_edited_and_never_once_absorbed(shared):
    shared.reflections.insert_reflections([Reflection(
        reflection_id="r9", agent_id="a1", scope="agent", scope_key="agent", content="Ann and Bob plan the venue",
        source_message_ids=["m1", "m2"], source_user_ids=["ann", "bob"], source_run_id="r1", formed_at=T0)])
    with pytest.raises(WithdrawRefused, match="written from a stretch of conversation that holds your messages"):
        withdraw(shared, _in("ann", "reflection", "r9"))
    shared.reflections.edit_reflection("r9", "The venue is being planned", at(70), "owner-key")
    out = withdraw(shared, _in("ann", "reflection", "r9"))
    assert (out.messages_out, out.versions_out) == (1, 1)
    [kept] = shared.reflections.list_reflections("a1", "agent")
    assert kept.content == "The venue is being planned" and kept.history == []
    assert kept.source_user_ids == ["bob"] and kept.source_message_ids == ["m2"]
    assert "reflections.source_user_ids" not in shared.provenance.footprint("ann").counts


def test_the_port_applies_a_withdrawal_only_to_the_state_it_was_planned_on(shared):
    from usecases.withdraw import _run_messages
    from pipeline import withdrawal

    [item] = shared.facts.get_facts(["f1"])
    planned = withdrawal.plan(item, "ann", _run_messages(shared, item))
    _update(shared, "f1", "The venue is Ibis Hall", "r3", "m2", "bob", "Bob: Ibis")
    assert shared.provenance.withdraw_user(planned) is None
    assert shared.facts.get_facts(["f1"])[0].source_user_ids == ["ann", "bob"]


def test_withdraw_keeps_only_the_metadata_someone_elses_message_carries_too(store):
    for n, user, meta in ((1, "ann", {"email": "ann@example.com", "project": "apollo"}), (2, "bob", {"project": "apollo"})):
        said = message(n, user=user, users=["ann", "bob"], content=f"said {n} by {user}")
        store.ingest.ingest_message(said.model_copy(update={"metadata": meta}), at(n))
    _run(store, "r1", 1, 2)
    store.facts.insert_fact(fact("f1", "The venue is Okapi Hall").model_copy(update={
        "source_message_ids": ["m1", "m2"], "source_user_ids": ["ann", "bob"], "source_run_id": "r1",
        "categories": ["travel"], "metadata": {"email": "ann@example.com", "project": "apollo"}}))
    _update(store, "f1", "The venue is Okapi Hall, room 2", "edit:owner", "m2", "bob", "Bob: room 2")
    assert store.facts.labelled_fact_ids("a1", ["agent"], [['meta:email="ann@example.com"']]) == {"f1"}
    withdraw(store, _in("ann"))
    [kept] = store.facts.get_facts(["f1"])
    assert kept.metadata == {"project": "apollo"} and kept.categories == ["travel"]
    assert store.facts.labelled_fact_ids("a1", ["agent"], [['meta:email="ann@example.com"']]) == set()
    assert store.facts.labelled_fact_ids("a1", ["agent"], [['meta:project="apollo"'], ["category:travel"]]) == {"f1"}


def test_withdraw_takes_out_the_metadata_values_only_their_messages_gave(store):
    ann, bob = ({"contact": "ann@example.org", "project": "apollo"}, {"project": "apollo", "tier": 2})
    for n, user, metadata in ((1, "ann", ann), (2, "bob", bob)):
        store.ingest.ingest_message(message(n, user=user, users=["ann", "bob"], content=f"said {n}").model_copy(
            update={"metadata": metadata}), at(n))
    _run(store, "r1", 1, 1)
    _run(store, "r2", 2, 2)
    store.facts.insert_fact(fact("f1", "The venue is Quokka Hall").model_copy(update={
        "source_message_ids": ["m1"], "source_user_ids": ["ann"], "source_run_id": "r1", "metadata": ann}))
    assert store.facts.update_fact("f1", FactUpdate(
        content="The venue is Okapi Hall", hash=text_hash("The venue is Okapi Hall"), embedding=None,
        embedding_model=None, run_id="r2", now=at(60), source_message_ids=["m2"], source_user_ids=["bob"],
        metadata=bob))
    withdraw(store, _in("ann"))
    [kept] = store.facts.get_facts(["f1"])
    assert kept.metadata == {"project": "apollo", "tier": 2}
