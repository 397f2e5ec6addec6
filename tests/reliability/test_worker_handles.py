"""A long-running worker does not leak SQLite connections: 50 formations on one threads
worker (a real Celery worker process, real Redis, SQLite) leave its open file handles where
they were after a warm-up (each formation's dedup used to open a connection, two or three
handles, per short-lived thread and keep it until the store was closed)."""

from __future__ import annotations

import random

import pytest

from testkit.scenarios.harness import producer_app, queues_idle, worker_env
from testkit.procstat import handles_on, open_handles
from testkit.scenarios.workload import end_event, plan_sessions, session_events
from testkit.procs import RedisServer, WorkerProcess
from testkit.waiting import settle, store_state
from pipeline.store.sqlite import SQLiteStore

pytestmark = pytest.mark.integration

MESSAGES = 6
SETTINGS = dict(llm_provider="offline", embedding_provider="hashing", formation_message_interval=MESSAGES,
                formation_token_interval=10**9, min_messages_to_form=4)
#: handles a worker may open once and keep (the dedup pool's 8 threads start as they are first
#: needed, each with its connection); a leak grows with the number of formations instead
#: (before the fix: 77 -> 283 over the same 50 formations)
ALLOWED_GROWTH = 10


def _done(store) -> int:
    return sum(1 for r in store.runs.list_runs(limit=100_000) if r.status == "done")


def test_fifty_formations_on_a_threads_worker_do_not_grow_its_open_handles(tmp_path, needs_redis):
    from workers.producer import CeleryPublisher

    db = tmp_path / "memory.db"
    store = SQLiteStore(str(db))
    store.create_indexes()
    rng = random.Random(7)
    plan = plan_sessions(rng, 60, prefix="handles", agents=2)
    with RedisServer(tmp_path / "redis") as redis:
        worker = WorkerProcess(
            broker_url=redis.url(0), result_backend=redis.url(1), store_url=f"sqlite:///{db}",
            log_file=tmp_path / "worker.log", queues=("ingest", "formation", "consolidation", "maintenance"),
            pool="threads", concurrency=4, extra_env=worker_env(**SETTINGS),
        ).wait_ready()
        publisher = CeleryPublisher(app=producer_app(redis.url(0), **SETTINGS), retry_max=3, timeout_s=5.0)
        try:
            def form(sessions: list[dict]) -> None:
                target = _done(store) + len(sessions)
                for s in sessions:
                    events = session_events(rng, agent_id=s["agent_id"], session_id=s["session_id"],
                                            users=s["users"], messages=MESSAGES)
                    publisher.publish_batch(events + [end_event(s["agent_id"], s["session_id"])])
                # every formation done and every task acked: the worker has nothing left open
                done = lambda: _done(store) >= target and queues_idle(redis.client(0))  # noqa: E731
                assert settle(done, lambda: store_state(store)), (
                    f"{_done(store)} of {target} formations done; log:\n{worker.log_text()[-3000:]}")

            form(plan[:10])  # warm-up: every pool thread, cache and connection is made here
            before, before_db = open_handles(worker.pid), handles_on(worker.pid, db.name)
            form(plan[10:])
            after, after_db = open_handles(worker.pid), handles_on(worker.pid, db.name)
        finally:
            publisher.close()
            worker.stop()
            store.close()
    assert after - before <= ALLOWED_GROWTH, (
        f"open handles {before} -> {after} over 50 formations (on {db.name}: {before_db} -> {after_db})")
