"""The webhooks port (``pipeline.store.ports.webhooks``) on every adapter: subscriptions,
deliveries queued once, claimed by one sender at a time, and withdrawn by an erasure."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

from schemas.webhooks import WebhookDelivery, WebhookEvent, WebhookSubscription

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


def subscription(sub_id="sub-1", agent="agent-1", at=T0) -> WebhookSubscription:
    return WebhookSubscription(subscription_id=sub_id, agent_id=agent, url="http://127.0.0.1:9/hook",
                               events=["fact.created"], secrets=["whsec_" + "A" * 44], created_at=at, updated_at=at)


def delivery(delivery_id, *, sub_id="sub-1", agent="agent-1", subjects=("ines",), at=T0) -> WebhookDelivery:
    event = WebhookEvent(event_id=f"e-{delivery_id}", kind="fact.created", agent_id=agent, occurred_at=at,
                         data={"fact_id": "f1"}, subjects=list(subjects))
    return WebhookDelivery(delivery_id=delivery_id, subscription_id=sub_id, agent_id=agent, event=event,
                           next_attempt_at=at, created_at=at)


def test_subscriptions_are_listed_per_agent_oldest_first(store):
    store.webhooks.put_subscription(subscription("sub-2", at=T0 + timedelta(seconds=1)))
    store.webhooks.put_subscription(subscription("sub-1"))
    store.webhooks.put_subscription(subscription("sub-3", agent="agent-2"))
    assert [s.subscription_id for s in store.webhooks.list_subscriptions("agent-1")] == ["sub-1", "sub-2"]
    assert len(store.webhooks.list_subscriptions()) == 3
    changed = subscription("sub-1").model_copy(update={"enabled": False, "disabled_reason": "410"})
    store.webhooks.put_subscription(changed)
    assert store.webhooks.get_subscription("sub-1").enabled is False


def test_a_delivery_queued_twice_is_queued_once(store):
    assert store.webhooks.add_deliveries([delivery("d1"), delivery("d2")]) == 2
    assert store.webhooks.add_deliveries([delivery("d2"), delivery("d3")]) == 1
    assert sorted(d.delivery_id for d in store.webhooks.list_deliveries(agent_id="agent-1")) == ["d1", "d2", "d3"]


def test_only_due_pending_deliveries_are_due_longest_waiting_first(store):
    store.webhooks.add_deliveries([delivery("late", at=T0 + timedelta(minutes=5)), delivery("d1"),
                          delivery("done").model_copy(update={"status": "delivered"})])
    assert store.webhooks.due_deliveries(T0) == ["d1"]
    assert store.webhooks.due_deliveries(T0 + timedelta(minutes=5)) == ["d1", "late"]


def test_one_sender_claims_a_delivery(store):
    store.webhooks.add_deliveries([delivery("d1")])
    won = []

    def claim():
        got = store.webhooks.claim_delivery("d1", T0, T0 + timedelta(minutes=1))
        if got is not None:
            won.append(got)

    threads = [threading.Thread(target=claim) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and won[0].next_attempt_at == T0 + timedelta(minutes=1)
    assert store.webhooks.claim_delivery("d1", T0 + timedelta(seconds=30), T0 + timedelta(minutes=2)) is None
    assert store.webhooks.claim_delivery("d1", T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)) is not None


def test_an_erasure_withdraws_the_deliveries_about_the_person(store):
    store.webhooks.put_subscription(subscription())
    store.webhooks.add_deliveries([delivery("d1", subjects=["ines"]), delivery("d2", subjects=["mallory"]),
                          delivery("d3", subjects=["ines"], agent="agent-2")])
    assert store.webhooks.forget_deliveries("ines", dry_run=True) == 2 and store.webhooks.get_delivery("d1") is not None
    assert store.webhooks.forget_deliveries("ines", "agent-1") == 1
    assert store.webhooks.get_delivery("d1") is None and store.webhooks.get_delivery("d3") is not None
    assert store.webhooks.forget_deliveries("ines") == 1
    assert [d.delivery_id for d in store.webhooks.list_deliveries()] == ["d2"]
    # a sender that read it before the erasure cannot write it back
    assert store.webhooks.save_delivery(delivery("d1").model_copy(update={"status": "delivered"})) is False
    assert store.webhooks.get_delivery("d1") is None


def test_deleting_a_subscription_deletes_its_log(store):
    store.webhooks.put_subscription(subscription())
    store.webhooks.add_deliveries([delivery("d1"), delivery("d2")])
    assert store.webhooks.delete_subscription("sub-1") == 3
    assert store.webhooks.list_deliveries() == [] and store.webhooks.get_subscription("sub-1") is None
    assert store.webhooks.delete_subscription("sub-1") == 0
