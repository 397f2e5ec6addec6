"""Webhooks end to end in the domain: a formation run announces what it did to facts, each
delivery reaches a real receiver that verifies its signature, a failing receiver is retried
on the schedule and switched off past the bound, content is opt-in and screened, and an
erasure withdraws every notice about the person, queued or sent."""

from __future__ import annotations

from datetime import timedelta

import pytest

from pipeline.errors import InvalidInput
from pipeline.formation.outputs import read_stored
from pipeline.formation.secrets import SecretGuard
from pipeline.forgetting import forget_user
from pipeline.webhooks import outbox, subscriptions
from pipeline.webhooks.sender import HttpSender
from schemas.documents import Stage
from testkit.formation import ALICE_CHAT, decisions, facts, reflections

SCHEDULE = [1.0, 5.0]


def subscribe(env, receiver, events=("fact.created", "fact.updated", "fact.retired"), **kw):
    sub = subscriptions.subscribe(env.store.webhooks, "agent-1", receiver.url, events, env.clock.now(), **kw)
    receiver.secret = sub.secrets[0]
    return sub


def send_due(env, *, disable_after=10):
    sender = HttpSender(5.0)
    try:
        return [outbox.attempt(env.store, sender, SecretGuard(), d, env.clock.now(), schedule=SCHEDULE,
                               disable_after=disable_after)
                for d in env.store.webhooks.due_deliveries(env.clock.now())]
    finally:
        sender.close()


def form(env, rows=ALICE_CHAT, fact_items=(("user", "Alice lives in Porto"), ("agent", "The venue is Riverside Park")),
         decide=None):
    env.llm.rules.clear()   # this run's answers only
    env.llm.on("decide_facts", decide or _decide)
    env.llm.on("extract_facts", facts(*fact_items))
    env.llm.on("extract_reflections", reflections())
    run_id = env.new_run(rows)
    _, step = env.whole_chain(run_id)
    return run_id, step


def test_a_run_announces_each_new_fact_once_to_a_verifying_receiver(env, receiver):
    subscribe(env, receiver)
    run_id, step = form(env)
    assert len(step.deliveries) == 2
    done = send_due(env)
    assert [d.outcome for d in done] == ["delivered", "delivered"]
    got = receiver.accepted()
    assert all(r.verified for r in got)
    assert sorted(r.payload["type"] for r in got) == ["fact.created", "fact.created"]
    stored = {f.fact_id for f in env.live_facts()}
    assert {r.payload["data"]["fact_id"] for r in got} == stored
    assert all("content" not in r.payload["data"] and r.payload["data"]["run_id"] == run_id for r in got)
    # announcing the same run again (a rerun of finish) queues nothing new
    run = env.store.runs.get_run(run_id)
    again = outbox.run_events(env.store, run, read_stored(run, Stage.DECIDE_FACTS), [], env.clock.now())
    assert len(again) == 2
    outbox.announce(env.store.webhooks, again, env.clock.now())
    assert len(env.store.webhooks.list_deliveries()) == 2 and send_due(env) == []


def _decide(request):
    """The venue's new text updates the stored venue; a new budget contradicts the stored one."""
    out = []
    for item in request.inputs["items"]:
        alias = {word: next((c["alias"] for c in item["candidates"] if word in c["text"]), None)
                 for word in ("venue", "budget")}
        if "hall B" in item["text"] and alias["venue"] is not None:
            out.append((item["new"], "UPDATE", alias["venue"], item["text"]))
        elif "15,000" in item["text"] and alias["budget"] is not None:
            out.append((item["new"], "DELETE", alias["budget"]))
        else:
            out.append((item["new"], "ADD"))
    return decisions(*out)


def test_an_update_and_a_retirement_are_announced_as_such(env, receiver):
    subscribe(env, receiver)
    form(env, fact_items=(("agent", "The venue is Riverside Park"), ("agent", "The budget is 12,000 euros")),
         decide=_decide)
    send_due(env)
    receiver.received.clear()
    env.clock.advance(seconds=60)
    venue = next(f for f in env.live_facts() if "venue" in f.content)
    budget = next(f for f in env.live_facts() if "budget" in f.content)
    form(env, fact_items=(("agent", "The venue is Riverside Park, hall B"), ("agent", "The budget is 15,000 euros")),
         decide=_decide)
    send_due(env)
    kinds = sorted((r.payload["type"], r.payload["data"]["fact_id"]) for r in receiver.accepted())
    new_budget = next(f for f in env.live_facts() if "15,000" in f.content)
    assert kinds == sorted([("fact.updated", venue.fact_id), ("fact.retired", budget.fact_id),
                            ("fact.created", new_budget.fact_id)])
    [retired] = [r.payload["data"] for r in receiver.accepted() if r.payload["type"] == "fact.retired"]
    assert retired["reason"] == "contradicted"


def test_a_failing_receiver_is_retried_on_the_schedule_and_recovers(env, receiver):
    subscribe(env, receiver, events=["fact.created"])
    receiver.fail_first = 1
    form(env, fact_items=(("agent", "The venue is Riverside Park"),))
    [first] = send_due(env)
    assert first.outcome == "retry" and first.retry_at == env.clock.now() + timedelta(seconds=SCHEDULE[0])
    assert send_due(env) == []   # not due yet
    env.clock.advance(seconds=1)
    [second] = send_due(env)
    assert second.outcome == "delivered"
    ids = [r.webhook_id for r in receiver.received]
    assert len(ids) == 2 and ids[0] == ids[1]    # the same webhook-id: the receiver can drop a repeat
    [log] = env.store.webhooks.list_deliveries(agent_id="agent-1")
    assert (log.status, log.attempts) == ("delivered", 2)
    assert env.store.webhooks.list_subscriptions("agent-1")[0].consecutive_failures == 0


def test_a_delivery_fails_after_the_schedule_and_redeliver_sends_it_again(env, receiver):
    subscribe(env, receiver, events=["fact.created"])
    receiver.fail_first = 3
    form(env, fact_items=(("agent", "The venue is Riverside Park"),))
    outcomes = []
    for wait in (0, 1, 5):
        env.clock.advance(seconds=wait)
        outcomes += [d.outcome for d in send_due(env)]
    assert outcomes == ["retry", "retry", "failed"]
    [log] = env.store.webhooks.list_deliveries()
    assert (log.status, log.last_status) == ("failed", 503)
    assert outbox.redeliver(env.store.webhooks, [log.delivery_id], env.clock.now()) == [log.delivery_id]
    assert [d.outcome for d in send_due(env)] == ["delivered"]


def test_repeated_failures_switch_the_subscription_off(env, receiver):
    subscribe(env, receiver, events=["fact.created"])
    receiver.fail_first = 99
    form(env, fact_items=(("agent", "The venue is Riverside Park"), ("agent", "The budget is 12,000 euros")),
         decide=_decide)
    assert [d.outcome for d in send_due(env, disable_after=2)] == ["retry", "failed"]
    sub = env.store.webhooks.list_subscriptions("agent-1")[0]
    assert not sub.enabled and "2 failed attempts in a row" in sub.disabled_reason
    env.clock.advance(seconds=1)
    assert [d.outcome for d in send_due(env)] == ["failed"]    # nothing sent to a switched-off endpoint
    assert len(receiver.received) == 2
    form(env, fact_items=(("agent", "The caterer is Lumen"),))
    assert env.store.webhooks.due_deliveries(env.clock.now()) == []   # none queued for it either
    subscriptions.enable(env.store.webhooks, sub, env.clock.now())
    assert env.store.webhooks.list_subscriptions("agent-1")[0].enabled


def test_410_gone_switches_the_subscription_off_at_once(env, receiver):
    subscribe(env, receiver, events=["fact.created"])
    receiver.fail_first, receiver.fail_status = 1, 410
    form(env, fact_items=(("agent", "The venue is Riverside Park"),))
    assert [d.outcome for d in send_due(env)] == ["failed"]
    assert "410" in env.store.webhooks.list_subscriptions("agent-1")[0].disabled_reason


def test_content_is_sent_only_when_opted_in_and_only_if_it_passes_the_screen(env, receiver):
    subscribe(env, receiver, events=["fact.created"], include_content=True)
    form(env, fact_items=(("agent", "The venue is Riverside Park"),))
    send_due(env)
    [got] = receiver.accepted()
    assert got.payload["data"]["content"] == "The venue is Riverside Park"
    receiver.received.clear()
    form(env, fact_items=(("agent", "The caterer is Riverside Foods"),))
    extra = SecretGuard([r"\bRiverside\b"])   # a pattern added after the fact was stored
    sender = HttpSender(5.0)
    for d in env.store.webhooks.due_deliveries(env.clock.now()):
        outbox.attempt(env.store, sender, extra, d, env.clock.now(), schedule=SCHEDULE, disable_after=10)
    sender.close()
    [got] = receiver.accepted()
    assert "content" not in got.payload["data"] and got.payload["data"]["content_withheld"] == "screened"


def test_an_erasure_withdraws_queued_notices_and_announces_the_erasure(env, receiver):
    subscribe(env, receiver, events=["fact.created", "user.forgotten"])
    form(env, fact_items=(("user", "Alice lives in Porto"), ("agent", "The venue is Riverside Park")))
    queued = env.store.webhooks.list_deliveries()
    assert len(queued) == 2
    forget_user(env.store, "u-1", "agent-1", settings=env.settings, llm=env.llm, clock=env.clock)
    send_due(env)
    got = [r.payload for r in receiver.accepted()]
    assert [p["type"] for p in got] == ["user.forgotten"]
    assert got[0]["data"] == {"agent_id": "agent-1", "user_id": "u-1"}
    # what is kept of the notice once sent names nobody
    [kept] = env.store.webhooks.list_deliveries()
    assert "u-1" not in kept.model_dump_json()


def test_a_subscription_needs_a_real_url_and_known_events(env):
    with pytest.raises(InvalidInput, match="url"):
        subscriptions.subscribe(env.store.webhooks, "agent-1", "ftp://example.com/x", ["fact.created"], env.clock.now())
    with pytest.raises(InvalidInput, match="url"):
        subscriptions.subscribe(env.store.webhooks, "agent-1", "https://user:pw@example.com/", ["fact.created"], env.clock.now())
    with pytest.raises(InvalidInput, match="fact.exploded"):
        subscriptions.subscribe(env.store.webhooks, "agent-1", "https://example.com/", ["fact.exploded"], env.clock.now())
