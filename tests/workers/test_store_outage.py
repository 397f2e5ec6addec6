"""A store outage (here: another process holds SQLite's write lock past the busy timeout) is
retried like any transient error; an event is never acked and lost, nor recorded as a bug in
the store that is down, and a formation run is left to the stale-run sweep, not failed."""

from __future__ import annotations

import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
from celery.exceptions import Retry

from pipeline.errors import StoreUnavailable
from pipeline.formation import stages
from schemas.access import Job, subject_digest
from workers import deps as worker_deps
from workers import ingest, maintenance
from workers.formation import extract_facts, guarded

from testkit.formation import ALICE_CHAT, facts, make_env

LOCK_HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("COMMIT")
"""


@contextmanager
def locked(path: Path):
    """Another process holds the database's write lock until the block ends."""
    proc = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, str(path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        yield
    finally:
        proc.stdin.write("\n")
        proc.stdin.flush()
        proc.wait(timeout=10)


def _message(i: int) -> dict:
    return {
        "type": "message.added", "event_id": f"e{i}", "agent_id": "a1", "session_id": "s1",
        "message": {"message_id": f"m{i}", "role": "user", "sender_id": "u1", "content": "I moved to Porto",
                    "created_at": "2026-03-01T10:00:00+00:00"},
    }

@pytest.fixture
def deps(worker_deps, sent):
    return worker_deps(sqlite_busy_timeout_s=0.2)


@pytest.mark.parametrize("task, kwargs", [
    (ingest.ingest_event, {"event": _message(1)}),
    (ingest.ingest_batch, {"events": [_message(1), _message(2)]}),
])
def test_an_event_whose_store_is_locked_is_retried_past_the_bounded_retries_never_recorded_or_lost(
        deps, delivery, sent, task, kwargs):
    path = Path(deps.settings.store_url[len("sqlite:///"):])
    retried = []
    with locked(path):
        for retries in (0, deps.settings.task_max_retries):
            # Celery's Task.retry re-raises the error instead once a stated max_retries is passed
            with delivery(task, retries, **kwargs), pytest.raises(Retry) as raised:
                task.run(**kwargs)
            retried.append(raised.value)
    assert all(isinstance(r.exc, StoreUnavailable) for r in retried)
    assert [name for name, _ in sent] == [task.name, task.name]
    assert sent[-1][1] == kwargs  # every event still to ingest, in the message kept queued
    # past the bounded retries the message stays queued (an unbounded retry), paced at the
    # backoff ceiling, instead of being acked away
    assert retried[-1].when >= 2 ** deps.settings.task_max_retries / 2
    assert deps.store.ingest.list_rejections() == []  # not recorded as a bug in the store that was down
    assert deps.store.ingest.count_messages("s1") == 0
    with delivery(task, deps.settings.task_max_retries, **kwargs):
        task.run(**kwargs)  # the redelivery, once the store is back
    assert deps.store.ingest.count_messages("s1") == (len(kwargs["events"]) if "events" in kwargs else 1)


@pytest.fixture
def injected(tmp_path):
    env = make_env(tmp_path)
    env.store.db.busy_timeout_s = 0.2
    env.store.db.close()  # the next connection waits 0.2 s for a lock
    worker_deps.set_deps(env)
    yield env
    worker_deps.set_deps(None)
    env.store.close()


def test_a_stage_whose_store_is_locked_retries_then_leaves_the_run_to_the_sweep(injected, tmp_path, delivery):
    injected.llm.on("extract_facts", facts(("user", "Alice's email is alice@example.com")))
    run_id = injected.new_run(ALICE_CHAT)

    def attempt(retries: int):
        with delivery(extract_facts, retries, run_id=run_id):
            return guarded(extract_facts, run_id, "extract_facts", lambda d: stages.extract_facts(run_id, d))

    with locked(tmp_path / "m.db"):
        with pytest.raises(Retry) as retried:
            attempt(1)
        assert isinstance(retried.value.exc, StoreUnavailable)
        assert attempt(injected.settings.task_max_retries) is None
    run = injected.store.runs.get_run(run_id)
    # nothing was written while the store was down: the run keeps its lease for the sweep
    assert run.status in ("claimed", "running") and run.error is None
    assert attempt(0) is not None
    assert injected.store.runs.get_run(run_id).stages["extract_facts"].status == "done"


def test_the_stale_run_sweep_retries_while_the_store_is_locked(deps, delivery, sent):
    for i in range(1, deps.settings.formation_message_interval + 1):
        ingest.ingest_event.run(_message(i))
    [run] = deps.store.runs.list_runs()
    deps.clock.advance(seconds=deps.settings.claim_lease_s + 1)  # its lease expired: the sweep reopens it
    sent.clear()
    task = maintenance.retry_stale_runs
    with locked(Path(deps.settings.store_url[len("sqlite:///"):])):
        with delivery(task, 0), pytest.raises(Retry) as retried:
            task.run()
    assert isinstance(retried.value.exc, StoreUnavailable)
    assert sent == [(task.name, {})]
    with delivery(task, 1):
        assert task.run()["reopened"] == 1


def test_a_job_whose_store_is_locked_stays_queued_past_the_bounded_retries(deps, delivery, sent):
    deps.store.access.put_job(Job(job_id="j1", kind="forget_user", agent_id="a1", user_id="u1",
                           subject=subject_digest("a1", "u1"), created_at=deps.clock.now()))
    task = maintenance.run_job
    with locked(Path(deps.settings.store_url[len("sqlite:///"):])):
        # an erasure asked for is not dropped, and its job could not be written anyway
        with delivery(task, deps.settings.task_max_retries, job_id="j1"), pytest.raises(Retry) as retried:
            task.run(job_id="j1")
    assert isinstance(retried.value.exc, StoreUnavailable) and sent == [(task.name, {"job_id": "j1"})]
    with delivery(task, deps.settings.task_max_retries + 1, job_id="j1"):
        assert task.run(job_id="j1") == {"job_id": "j1", "status": "done"}
