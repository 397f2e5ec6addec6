"""Beat's schedule and the maintenance tasks: each claimed or reopened run is started by name."""

from __future__ import annotations

from datetime import timedelta

import pytest

import beat_schedule
from pipeline import names
from pipeline.ingest import ingest_raw_event
from schemas.settings import Settings
from schemas.webhooks import WebhookSubscription
from testkit.documents import fact
from workers import maintenance
from workers.app import app


def test_beat_runs_the_sweep_the_stale_retry_the_expiry_and_the_due_webhooks_and_nothing_else():
    schedule = beat_schedule.build_schedule(Settings(sweep_interval_s=600, retry_stale_interval_s=90,
                                                     webhook_sweep_interval_s=20, expiry_interval_s=45))
    assert {entry["task"]: entry["schedule"] for entry in schedule.values()} == {
        names.TASK_SWEEP_COLD: 600.0,
        names.TASK_RETRY_STALE: 90.0,
        names.TASK_STAMP_EXPIRED: 45.0,
        names.TASK_SEND_DUE_WEBHOOKS: 20.0,
    }
    assert all(entry["options"]["queue"] == names.QUEUE_MAINTENANCE for entry in schedule.values())


def test_the_celery_app_carries_the_schedule():
    assert {e["task"] for e in app.conf.beat_schedule.values()} == {
        names.TASK_SWEEP_COLD, names.TASK_RETRY_STALE, names.TASK_STAMP_EXPIRED, names.TASK_SEND_DUE_WEBHOOKS}


@pytest.fixture
def deps(worker_deps):
    return worker_deps(claim_lease_s=60, max_run_attempts=2, task_soft_time_limit_s=30, task_time_limit_s=50)


def _say(deps, session_id, n):
    for i in range(n):
        ingest_raw_event({
            "type": "message.added", "event_id": f"{session_id}-{i}", "agent_id": "a1", "session_id": session_id,
            "message": {"message_id": f"m{i}", "role": "user", "sender_id": "u1", "content": "hello there",
                        "created_at": deps.clock.now().isoformat()},
        }, deps.store, deps.settings, deps.clock)


def test_the_sweep_task_starts_the_first_stage_of_each_claimed_run(deps, sent):
    _say(deps, "cold", 4)
    _say(deps, "short", 2)
    deps.clock.advance(minutes=10)
    assert maintenance.sweep_cold_sessions() == {"claimed": 1, "candidates": 1}
    [run] = deps.store.runs.list_runs(session_id="cold")
    assert sent == [(names.TASK_EXTRACT_FACTS, {"run_id": run.run_id})]


def test_the_retry_task_restarts_stale_runs_and_buries_exhausted_ones(deps, sent):
    _say(deps, "s1", 4)
    deps.clock.advance(minutes=10)
    maintenance.sweep_cold_sessions()
    [run] = deps.store.runs.list_runs(session_id="s1")
    sent.clear()
    deps.clock.advance(minutes=2)
    assert maintenance.retry_stale_runs() == {"reopened": 1, "dead": 0, "held": 0}
    assert sent == [(names.TASK_EXTRACT_FACTS, {"run_id": run.run_id})]
    deps.clock.advance(minutes=2)
    assert maintenance.retry_stale_runs() == {"reopened": 0, "dead": 1, "held": 0}
    assert deps.store.runs.get_run(run.run_id).status == "dead"
    assert len(sent) == 1


def test_the_expiry_task_stamps_expired_facts_once_and_sends_their_announcements(deps, sent):
    now = deps.clock.now()
    deps.store.webhooks.put_subscription(WebhookSubscription(
        subscription_id="sub-1", agent_id="a1", url="http://127.0.0.1:9/hook", events=["fact.retired"],
        secrets=["whsec_" + "A" * 44], created_at=now, updated_at=now))
    deps.store.facts.insert_fact(fact("f1", "the caterer needs the count", formed=now).model_copy(
        update={"expires_at": now + timedelta(hours=1)}))
    deps.store.facts.insert_fact(fact("f2", "the venue has a piano", formed=now))
    assert maintenance.stamp_expired_facts() == {"retired": 0, "announced": 0}
    deps.clock.advance(hours=2)
    assert maintenance.stamp_expired_facts() == {"retired": 1, "announced": 1}
    f1, f2 = deps.store.facts.get_facts(["f1", "f2"])
    assert (f1.retired_reason, f1.valid_to, f2.retired_at) == ("expired", now + timedelta(hours=1), None)
    [queued] = deps.store.webhooks.list_deliveries(agent_id="a1")
    assert sent == [(names.TASK_DELIVER_WEBHOOK, {"delivery_id": queued.delivery_id})]
    assert maintenance.stamp_expired_facts() == {"retired": 0, "announced": 0}
    assert len(sent) == 1


def test_a_task_sent_by_name_reaches_only_its_own_queue(monkeypatch):
    from schemas.settings import get_settings
    from workers.app import create_app

    monkeypatch.setenv("MEMORY_BROKER_URL", "memory://routing-test")
    monkeypatch.setenv("MEMORY_RESULT_BACKEND", "cache+memory://")
    get_settings.cache_clear()
    try:
        routed = create_app()
    finally:
        get_settings.cache_clear()
    expected = {names.TASK_SWEEP_COLD: names.QUEUE_MAINTENANCE, names.TASK_EXTRACT_FACTS: names.QUEUE_FORMATION,
                names.TASK_CONSOLIDATE_SESSION: names.QUEUE_CONSOLIDATION, names.TASK_INGEST_EVENT: names.QUEUE_INGEST}
    with routed.connection_for_write() as conn:
        channel = conn.default_channel
        for queue in routed.amqp.queues.values():
            queue.bind(channel).declare()
            queue.bind(channel).purge()
        for task, queue in expected.items():
            routed.send_task(task, kwargs={"run_id": "r1"}, connection=conn)
            depths = {q: channel.queue_declare(queue=q, passive=True).message_count for q in names.QUEUES}
            assert depths == {q: int(q == queue) for q in names.QUEUES}, task
            routed.amqp.queues[queue].bind(channel).purge()
    routed.close()
