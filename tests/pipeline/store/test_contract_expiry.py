"""Expiry on every adapter (design §13 "Expiry"): ``expires_at`` is stored and read back, the
expired live facts are found by index, soonest first, and stamped retired with the reason
``expired``, valid until their expiry, with their history, once; an edit can set a new expiry."""

from __future__ import annotations

from datetime import timedelta

from pipeline import expiry, validity
from pipeline.store.port import FactUpdate
from pipeline.text import text_hash
from pipeline.webhooks import events as webhook_events, outbox
from schemas.webhooks import WebhookSubscription
from testkit.documents import T0, at, fact


def expiring(fact_id: str, content: str, seconds: float | None, **kwargs):
    f = fact(fact_id, content, **kwargs)
    return f.model_copy(update={"expires_at": None if seconds is None else at(seconds)})


def test_expires_at_is_stored_and_an_old_fact_reads_with_none(store):
    store.facts.insert_fact(expiring("f1", "the caterer needs the count", 3600))
    store.facts.insert_fact(fact("f2", "Ines likes tea"))
    got = {f.fact_id: f for f in store.facts.get_facts(["f1", "f2"])}
    assert got["f1"].expires_at == at(3600)
    assert got["f2"].expires_at is None and got["f2"].retired_reason is None


def test_expired_live_facts_are_listed_soonest_first_and_no_other(store):
    store.facts.insert_fact(expiring("late", "the venue is booked", 200))
    store.facts.insert_fact(expiring("soon", "the caterer needs the count", 100))
    store.facts.insert_fact(expiring("future", "the band plays", 10_000))
    store.facts.insert_fact(fact("never", "Ines likes tea"))
    store.facts.insert_fact(expiring("gone", "the cake is ordered", 50))
    store.facts.retire_fact("gone", at(60), "run-1", reason="contradicted")
    assert store.facts.expired_fact_ids(at(300), 10) == ["soon", "late"]
    assert store.facts.expired_fact_ids(at(300), 1) == ["soon"]
    assert store.facts.expired_fact_ids(at(100), 10) == ["soon"]   # at its expiry it has expired
    assert store.facts.expired_fact_ids(at(99), 10) == []
    assert store.facts.get_facts(["gone"])[0].retired_reason == "contradicted"


def test_the_stamp_retires_with_the_reason_keeps_history_and_moves_the_stamp_once(store):
    store.facts.insert_fact(expiring("f1", "the count is due", 100, user="u1"))
    store.facts.update_fact("f1", FactUpdate(content="the count of 40 is due", hash=text_hash("the count of 40 is due"),
                                       embedding=None, embedding_model=None, run_id="run-2", now=at(10)))
    before = store.leases.get_scope_versions("a1", ["user:u1"])["user:u1"]
    done = expiry.stamp_expired(store, at(500), batch=10)
    assert done.retired == ["f1"]
    [stamped] = store.facts.get_facts(["f1"])
    assert (stamped.retired_at, stamped.retired_reason, stamped.valid_to) == (at(500), "expired", at(100))
    assert [h.content for h in stamped.history] == ["the count is due"]
    assert store.leases.get_scope_versions("a1", ["user:u1"])["user:u1"] > before
    assert validity.version_at(stamped, at(99)).content == "the count of 40 is due"
    assert validity.version_at(stamped, at(100)) is None
    again = expiry.stamp_expired(store, at(600), batch=10)
    assert again.retired == [] and store.facts.get_facts(["f1"])[0].retired_at == at(500)


def test_the_stamp_frees_the_text_for_a_new_fact(store):
    store.facts.insert_fact(expiring("f1", "the count is due", 100))
    assert store.facts.insert_fact(fact("f2", "the count is due", formed=at(200))) == (False, "f1")
    expiry.stamp_expired(store, at(200), batch=10)
    assert store.facts.insert_fact(fact("f2", "the count is due", formed=at(200))) == (True, "f2")


def test_the_stamp_works_in_batches_and_announces_each_expiry_once(store):
    store.webhooks.put_subscription(WebhookSubscription(
        subscription_id="sub-1", agent_id="a1", url="http://127.0.0.1:9/hook", events=["fact.retired"],
        secrets=["whsec_" + "A" * 44], created_at=T0, updated_at=T0))
    for i in range(5):
        store.facts.insert_fact(expiring(f"f{i}", f"deadline number {i}", 10 + i))
    done = expiry.stamp_expired(store, at(100), batch=2)
    assert sorted(done.retired) == [f"f{i}" for i in range(5)] and len(done.deliveries) == 5
    events = [d.event for d in store.webhooks.list_deliveries(agent_id="a1")]
    assert sorted(e.data["fact_id"] for e in events) == [f"f{i}" for i in range(5)]
    assert {(e.kind, e.data["reason"]) for e in events} == {("fact.retired", "expired")}
    # announcing again (a task redelivered after it announced) queues nothing twice
    outbox.announce(store.webhooks, [webhook_events.expired_event(f, at(100)) for f in store.facts.get_facts(done.retired)], at(100))
    assert len(store.webhooks.list_deliveries(agent_id="a1")) == 5


def test_an_edit_sets_a_new_expiry_and_keeps_the_old_one_when_given_none(store):
    store.facts.insert_fact(expiring("f1", "the count is due", 100))
    change = dict(embedding=None, embedding_model=None, now=at(10))
    store.facts.update_fact("f1", FactUpdate(content="the count is due soon", hash=text_hash("the count is due soon"),
                                       run_id="edit:1", **change))
    assert store.facts.get_facts(["f1"])[0].expires_at == at(100)
    store.facts.update_fact("f1", FactUpdate(content="the count is due now", hash=text_hash("the count is due now"),
                                       run_id="edit:2", expires_at=at(100) + timedelta(days=1), **change))
    assert store.facts.get_facts(["f1"])[0].expires_at == at(100) + timedelta(days=1)
    assert store.facts.expired_fact_ids(at(200), 10) == []


def test_an_edit_can_clear_the_expiry_and_the_fact_is_no_longer_found_as_expired(store):
    store.facts.insert_fact(expiring("f1", "the count is due", 100))
    store.facts.update_fact("f1", FactUpdate(content="the count is due, some day", hash=text_hash("the count is due, some day"),
                                       embedding=None, embedding_model=None, now=at(10), run_id="edit:1",
                                       clear_expiry=True))
    [edited] = store.facts.get_facts(["f1"])
    assert edited.expires_at is None and edited.version == 2
    assert store.facts.expired_fact_ids(at(200), 10) == []
    assert validity.version_at(edited, at(500)).content == "the count is due, some day"
