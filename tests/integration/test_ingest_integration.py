"""A real redis-server and a real Celery worker ingest events from 4 producer processes."""

from __future__ import annotations

import base64
import json
import multiprocessing as mp
import random

import pytest

from pipeline import names
from pipeline.store.sqlite import SQLiteStore
from testkit.producers import produce
from testkit.waiting import settle
from workers.producer import CeleryPublisher, message_event

pytestmark = pytest.mark.integration

SESSIONS = 8
MESSAGES = 1000
PRODUCERS = 4


def fields(index: int, *, event_id: str | None = None, role: str | None = None) -> dict:
    user = f"user-{index % 3}"
    return {
        "agent_id": "agent-int",
        "session_id": f"int-s{index % SESSIONS}",
        "role": role or ("user" if index % 3 else "assistant"),
        "sender_id": user,
        "session_users": [user],
        "message_id": f"m{index}",
        "event_id": event_id or f"e{index}",
        "content": f"message {index} about the Mars festival",
    }


def producer_workloads() -> tuple[list[list[dict]], int, list[dict]]:
    """1,000 distinct messages, 60 re-sent events and 40 re-sent messages under new event ids,
    shuffled over 4 producers (a copy may arrive before its original); and 5 invalid events,
    which the producer API refuses, for the queue directly (as a producer in another language
    would write them)."""
    originals = [fields(i) for i in range(MESSAGES)]
    same_event = [fields(i) for i in range(0, 600, 10)]
    same_message = [fields(i, event_id=f"again-{i}") for i in range(5, 405, 10)]
    invalid = [fields(MESSAGES + i, role="narrator") for i in range(5)]
    everything = originals + same_event + same_message
    random.Random(7).shuffle(everything)
    return [everything[p::PRODUCERS] for p in range(PRODUCERS)], len(same_event) + len(same_message), invalid


def _queued_run_ids(client) -> list[str]:
    run_ids = []
    for raw in client.lrange(names.QUEUE_FORMATION, 0, -1):
        message = json.loads(raw)
        assert message["headers"]["task"] == names.TASK_EXTRACT_FACTS
        _args, kwargs, _embed = json.loads(base64.b64decode(message["body"]))
        run_ids.append(kwargs["run_id"])
    return run_ids


def test_four_producer_processes_get_every_message_stored_exactly_once(
    tmp_path, broker_urls, redis_server, celery_worker_process, celery_app_for
):
    db = tmp_path / "memory.db"
    celery_worker_process(store_url=f"sqlite:///{db}", queues=(names.QUEUE_INGEST,), concurrency=2)
    workloads, duplicates, invalid_items = producer_workloads()
    invalid = len(invalid_items)
    broker, backend = broker_urls
    raw = CeleryPublisher(celery_app_for(broker, backend))  # the queue itself: no producer-side check
    raw.publish_batch([message_event(**item) for item in invalid_items])
    raw.close()

    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(PRODUCERS)
    done = ctx.Queue()
    modes = ["batch", "batch", "single", "single"]  # publish_messages and publish_message
    procs = [
        ctx.Process(target=produce, args=(mode, broker, backend, work, barrier, done))
        for mode, work in zip(modes, workloads)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
    assert [p.exitcode for p in procs] == [0] * PRODUCERS

    store = SQLiteStore(str(db))
    sessions = [f"int-s{i}" for i in range(SESSIONS)]

    def outcome() -> tuple[int, int, int]:
        stored = sum(store.ingest.count_messages(s) for s in sessions)
        dups = sum(st.duplicates for s in sessions if (st := store.ingest.get_session(s)) is not None)
        return stored, dups, len(store.ingest.list_rejections(limit=1000))

    # for as long as the worker keeps storing (a loaded machine is slow, not wrong)
    settle(lambda: outcome() == (MESSAGES, duplicates, invalid), outcome, confirm_s=0.0, interval=0.2)
    assert outcome() == (MESSAGES, duplicates, invalid)

    runs = {}
    for session_id in sessions:
        count = store.ingest.count_messages(session_id)
        stored = store.ingest.get_messages(session_id, 1, count)
        # every message once, with the sequence numbers 1..n without a gap
        assert sorted(m.seq for m in stored) == list(range(1, count + 1))
        index = int(session_id.removeprefix("int-s"))
        assert {m.message_id for m in stored} == {f"m{i}" for i in range(index, MESSAGES, SESSIONS)}
        # no formation worker runs: the first threshold claim still holds the session
        [run] = store.runs.list_runs(session_id=session_id)
        assert (run.reason, run.seq_from) == ("threshold", 1)
        assert run.seq_to >= 45
        runs[run.run_id] = run
    rejected = store.ingest.list_rejections(limit=1000)
    assert {r.errors[0]["field"] for r in rejected} == {"message.role"}
    assert sorted(_queued_run_ids(redis_server.client(int(broker.rsplit("/", 1)[1])))) == sorted(runs)
    store.close()
