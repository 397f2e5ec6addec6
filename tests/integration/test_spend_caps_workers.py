"""A hard spend cap across real processes: a real redis-server and a real Celery worker on
SQLite (offline LLM, hashing embedder). A run of an agent over its hard cap waits, re-queued
with a countdown, its lease renewed by each start so the stale-run sweep leaves it alone, while
the session's events are still stored; raising the cap (in the store, as ``memoryctl caps``
does) lets it go on, and it forms its facts once."""

from __future__ import annotations

from collections import Counter

import pytest

from pipeline.clock import Clock
from pipeline.store.sqlite import SQLiteStore
from pipeline.sweep import retry_stale_runs
from schemas.caps import SpendCaps, WindowCaps
from schemas.settings import Settings
from testkit.waiting import settle, store_state
from workers.producer import CeleryPublisher, end_session, publish_messages

AGENT, SESSION = "capped-agent", "capped-session"
# short leases, so a deferral's countdown (half the claim lease) comes round within the test
LEASES = {"MEMORY_TASK_SOFT_TIME_LIMIT_S": "5", "MEMORY_TASK_TIME_LIMIT_S": "6", "MEMORY_CLAIM_LEASE_S": "8",
          "MEMORY_CONSOLIDATION_LEASE_S": "8"}
LINES = ["I live in Porto and I work as a nurse.", "My sister Ana is a pilot.", "I prefer tea to coffee."]


@pytest.fixture
def scenario(tmp_path, broker_urls, celery_worker_process, celery_app_for):
    db = tmp_path / "memory.db"
    store = SQLiteStore(str(db))
    store.create_indexes()
    # spend is 0 USD offline: a hard cap of 0 is reached at once
    store.caps.put_spend_caps(AGENT, SpendCaps(day=WindowCaps(hard_usd=0)), Clock().now())
    worker = celery_worker_process(
        store_url=f"sqlite:///{db}", queues=("ingest", "formation", "consolidation"), concurrency=2,
        extra_env={"MEMORY_LLM_PROVIDER": "offline", "MEMORY_EMBEDDING_PROVIDER": "hashing", **LEASES})
    publisher = CeleryPublisher(app=celery_app_for(*broker_urls))
    yield store, worker, publisher
    publisher.close()
    store.close()


def _publish(publisher, lines, first: int) -> None:
    publish_messages([{"agent_id": AGENT, "session_id": SESSION, "message_id": f"m{first + i}", "role": "user",
                       "sender_id": "u1", "sender_name": "Rosa", "content": text, "session_users": ["u1"]}
                      for i, text in enumerate(lines)], publisher=publisher)


def _runs(store):
    return store.runs.list_runs(session_id=SESSION)


def _waiting(store) -> bool:
    runs = _runs(store)
    return bool(runs) and all((r.stages.get("extract_facts") and r.stages["extract_facts"].error or "").find(
        "hard spend cap") >= 0 and r.status == "running" and r.stages["extract_facts"].attempts >= 3 for r in runs)


def test_a_capped_run_waits_across_processes_keeps_its_events_and_forms_once_when_the_cap_is_raised(scenario):
    store, worker, publisher = scenario
    _publish(publisher, LINES, 0)
    end_session(AGENT, SESSION, publisher=publisher)
    # three starts of the stage, 4 s apart: more than one claim lease (8 s) in all
    assert settle(lambda: _waiting(store), lambda: store_state(store), confirm_s=0.0, interval=0.2), \
        f"runs {[(r.status, r.stages) for r in _runs(store)]}\n{worker.log_text()[-3000:]}"
    settings = Settings(_env_file=None, **{k.removeprefix("MEMORY_").lower(): int(v) for k, v in LEASES.items()})
    swept = retry_stale_runs(store.runs, settings, Clock().now())
    assert swept.run_ids == [] and swept.dead == []          # waiting is not stale
    _publish(publisher, ["I started learning the cello."], len(LINES))
    assert settle(lambda: store.ingest.count_messages(SESSION) == len(LINES) + 1, lambda: store_state(store),
                  confirm_s=0.0, interval=0.2)
    assert store.facts.list_facts(AGENT, "user:u1", include_retired=True) == []   # nothing formed while over

    store.caps.put_spend_caps(AGENT, None, Clock().now())         # raised: no cap
    def formed() -> bool:
        runs = _runs(store)
        assert not any(r.status in ("failed", "dead") for r in runs), [(r.status, r.error) for r in runs]
        return bool(runs) and all(r.status == "done" for r in runs)
    assert settle(formed, lambda: store_state(store), confirm_s=1.0, interval=0.2), worker.log_text()[-3000:]
    facts = store.facts.list_facts(AGENT, "user:u1", include_retired=True)
    assert store.ingest.count_messages(SESSION) == len(LINES) + 1     # the late message stays, for the next run
    assert facts and all(n == 1 for n in Counter(f.content for f in facts).values())
