"""A hung provider on the threads pool (design §11 "Providers", bounded work): Celery does not enforce
task time limits there (celery/celery#9203), so each call's own hard bound must end it. A real
``celery worker --pool threads`` process runs extract_facts against the local Chat Completions
server. Facts are extracted; then every premium call (the paying user's reflections) is
trickled over ten times the call's timeout, a byte at a time, so no read timeout ever fires.
Each call is abandoned at its bound, the stage is retried as configured, and the run is failed
for the stale-run sweep, by its one holder, while the server is still sending."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

from pipeline.clock import FrozenClock

from pipeline import names, sweep
from pipeline.ingest import ingest_raw_event
from pipeline.store.sqlite import SQLiteStore
from schemas.settings import Settings
from testkit.llm_server import Answer, LLMServer, Trickle

TIMEOUT_S = 1
FACTS = '{"facts": [{"text": "Alice\'s email is alice@example.com.", "scope": "user"}]}'
REFLECTIONS = '{"agent": [], "user": [], "session": []}'


def _paying_users_run(store, settings) -> str:
    """Four messages of a paying user (tier 1: reflections use the premium model), claimed by
    beat's cold sweep ten minutes later."""
    now = datetime.now(timezone.utc)
    for i in range(4):
        ingest_raw_event({
            "type": "message.added", "event_id": f"e{i}", "agent_id": "a1", "session_id": "s-hung", "user_tier": 1,
            "message": {"message_id": f"m{i}", "role": "user", "sender_id": "u1", "created_at": now.isoformat(),
                        "content": "I am Alice and my email is alice@example.com."},
        }, store, settings, FrozenClock(now))
    [run_id] = sweep.sweep_cold_sessions(store, settings, now + timedelta(minutes=10)).run_ids
    return run_id


def test_a_hung_provider_ends_each_call_at_its_bound_and_fails_the_run_for_the_sweep(
        tmp_path, broker_urls, celery_worker_process, celery_app_for):
    db = tmp_path / "memory.db"
    store = SQLiteStore(str(db))
    store.create_indexes()
    settings = Settings(_env_file=None, store_url=f"sqlite:///{db}")
    run_id = _paying_users_run(store, settings)
    with LLMServer() as server:
        server.script("chat", Answer(FACTS), *[Trickle(Answer(REFLECTIONS), seconds=10 * TIMEOUT_S)] * 6)
        celery_worker_process(store_url=f"sqlite:///{db}", queues=("formation",), pool="threads", concurrency=4,
                              extra_env={
                                  "MEMORY_LLM_PROVIDER": "openai", "OPENAI_API_KEY": server.openai_key,
                                  "MEMORY_OPENAI_BASE_URL": server.openai_base_url,
                                  "MEMORY_EMBEDDING_PROVIDER": "hashing",
                                  **{f"MEMORY_LLM_TIMEOUT_{tier}_S": str(TIMEOUT_S) for tier in ("FAST", "FREE", "PREMIUM")},
                                  "MEMORY_TASK_MAX_RETRIES": "1", "MEMORY_TASK_RETRY_BACKOFF_MAX_S": "1",
                              })
        celery_app_for(*broker_urls).send_task(names.TASK_EXTRACT_FACTS, kwargs={"run_id": run_id},
                                               queue=names.QUEUE_FORMATION)
        deadline = time.monotonic() + 60
        while store.runs.run_status(run_id) not in ("failed", "dead", "done") and time.monotonic() < deadline:
            time.sleep(0.1)
        calls = [body["model"] for body in server.bodies("/chat/completions")]
        # each abandoned call hangs up at its bound: the server's next byte finds the socket
        # closed (it would otherwise trickle on for 10 s per call)
        ended = time.monotonic() + 30
        while server.hung_up + server.trickled < 2 and time.monotonic() < ended:
            time.sleep(0.1)
        hung_up, trickled = server.hung_up, server.trickled
    run = store.runs.get_run(run_id)
    assert run.status == "failed", run.status
    assert run.error.startswith("extract_reflections: DeadlineExceeded after 1 retries")
    assert "no whole answer within 1s" in run.error
    # the configured attempts of premium calls and no more: one call, one retry
    assert calls == ["gpt-6-luna", "gpt-6.1-sol", "gpt-6.1-sol"]
    assert run.stages["extract_reflections"].attempts == 2
    # the run was never taken over (one holder), and the worker hung up on both trickled answers
    # instead of reading them to their end
    assert run.attempts == 1
    assert (hung_up, trickled) == (2, 0)
    # beat's stale-run retry reopens it: a retried run, its second attempt
    reopened = sweep.retry_stale_runs(store.runs, settings, datetime.now(timezone.utc))
    assert reopened.run_ids == [run_id] and store.runs.get_run(run_id).attempts == 2
    store.close()
