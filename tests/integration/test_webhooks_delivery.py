"""Webhooks across real processes: a real redis-server, real Celery worker processes (ingest,
formation, consolidation, maintenance) on SQLite with the offline LLM, and a real receiver on
loopback that verifies every signature with the Standard Webhooks reference library. The
receiver fails its first delivery; the maintenance worker's retry (a Celery countdown on the
schedule) delivers it, once per fact, each under the same webhook-id on every attempt."""

from __future__ import annotations

import pytest

from pipeline.clock import Clock
from pipeline.store.sqlite import SQLiteStore
from pipeline.webhooks.subscriptions import subscribe
from testkit.waiting import settle, store_state
from testkit.webhook_receiver import Receiver
from workers.producer import CeleryPublisher, end_session, publish_messages

CHAT = [
    ("user", "u-ines", "Hi, I'm Ines. I moved to Porto last year and I work at Lumen Labs."),
    ("assistant", None, "Nice to meet you, Ines."),
    ("user", "u-ines", "The Lumen launch party is on 14 March at the Riverside Hall, budget 12,000 euros."),
    ("assistant", None, "Noted: 14 March, Riverside Hall."),
]


@pytest.fixture
def receiver():
    r = Receiver(fail_first=1).start()
    yield r
    r.stop()


def test_a_formed_fact_reaches_a_failing_then_recovering_receiver_signed_and_once(
        tmp_path, broker_urls, celery_worker_process, celery_app_for, receiver):
    db = tmp_path / "memory.db"
    store = SQLiteStore(str(db))
    store.create_indexes()
    sub = subscribe(store.webhooks, "agent-w", receiver.url, ["fact.created"], Clock().now())
    receiver.secret = sub.secrets[0]
    worker = celery_worker_process(
        store_url=f"sqlite:///{db}", queues=("ingest", "formation", "consolidation", "maintenance"), concurrency=3,
        extra_env={"MEMORY_LLM_PROVIDER": "offline", "MEMORY_EMBEDDING_PROVIDER": "hashing",
                   "MEMORY_WEBHOOK_RETRY_SCHEDULE_S": "[1]"},
    )
    publisher = CeleryPublisher(app=celery_app_for(*broker_urls))
    try:
        publish_messages([{"agent_id": "agent-w", "session_id": "s-w", "message_id": f"m{i}", "role": role,
                           "sender_id": sender, "content": text, "session_users": ["u-ines"]}
                          for i, (role, sender, text) in enumerate(CHAT)], publisher=publisher)
        end_session("agent-w", "s-w", publisher=publisher)

        def delivered() -> bool:
            if not worker.is_alive():
                pytest.fail(f"the worker died:\n{worker.log_text()[-3000:]}")
            live = store.facts.list_facts("agent-w")
            accepted = {r.payload["data"]["fact_id"] for r in receiver.accepted()}
            return bool(live) and accepted == {f.fact_id for f in live}

        if not settle(delivered, lambda: (store_state(store), len(receiver.received)), confirm_s=1.0, interval=0.2):
            pytest.fail(f"not delivered: {receiver.received}\n{worker.log_text()[-4000:]}")
    finally:
        publisher.close()
    live = store.facts.list_facts("agent-w")
    accepted = receiver.accepted()
    assert all(r.verified and r.payload["type"] == "fact.created" for r in accepted)
    assert len(accepted) == len(live)                     # once per fact
    first = receiver.received[0]
    assert first.status == 503 and first.webhook_id in {r.webhook_id for r in accepted}   # the retry, same id
    log = store.webhooks.list_deliveries(agent_id="agent-w")
    assert {d.status for d in log} == {"delivered"}
    assert sorted(d.attempts for d in log) == [1] * (len(log) - 1) + [2]
    store.close()
