"""A store outage (here: another process holds SQLite's write lock past the busy timeout) is
retried like any transient error; an event is never acked and lost, nor recorded as a bug in
the store that is down, and a formation run is left to the stale-run sweep, not failed."""

from __future__ import annotations

import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest

from pipeline.errors import StoreUnavailable
from pipeline.formation import stages
from workers import deps as worker_deps
from workers import ingest, maintenance
from workers.app import app
from workers.base import MemoryTask

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


class Retried(Exception):
    pass


class FakeTask:
    """The parts of a bound Celery task the error policy uses; retry() is recorded."""

    retry_delay = MemoryTask.retry_delay
    retry_transient = MemoryTask.retry_transient
    retry_if_left = MemoryTask.retry_if_left
    retry_bound = MemoryTask.retry_bound
    _run_stage = MemoryTask._run_stage
    name = "fake"

    def __init__(self, retries: int = 0) -> None:
        self.request = SimpleNamespace(retries=retries, id="t-1")

    def retry(self, exc, countdown, max_retries, **_):
        raise Retried(exc)


guarded = MemoryTask.guarded  # the error policy, run on the fake task


def _message(i: int) -> dict:
    return {
        "type": "message.added", "event_id": f"e{i}", "agent_id": "a1", "session_id": "s1",
        "message": {"message_id": f"m{i}", "role": "user", "sender_id": "u1", "content": "I moved to Porto",
                    "created_at": "2026-03-01T10:00:00+00:00"},
    }


@pytest.fixture
def deps(worker_deps, monkeypatch):
    d = worker_deps(sqlite_busy_timeout_s=0.2)
    monkeypatch.setattr(app, "send_task", lambda *a, **k: None)
    return d


def _run_as(task, retries: int, *args, **kwargs):
    task.push_request(retries=retries, called_directly=False, id="t-1")
    try:
        return task.run(*args, **kwargs)
    finally:
        task.pop_request()


@pytest.mark.parametrize("task, args", [
    (ingest.ingest_event, (_message(1),)),
    (ingest.ingest_batch, ([_message(1), _message(2)],)),
])
def test_an_event_whose_store_is_locked_is_retried_past_the_bounded_retries_never_recorded_or_lost(
        deps, monkeypatch, task, args):
    retried = []
    monkeypatch.setattr(task, "retry", lambda exc=None, **kw: retried.append((exc, kw)) or Retried(exc))
    path = Path(deps.settings.store_url[len("sqlite:///"):])
    with locked(path):
        with pytest.raises(Retried):
            _run_as(task, 0, *args)
        with pytest.raises(Retried):
            _run_as(task, deps.settings.task_max_retries, *args)
    assert all(isinstance(exc, StoreUnavailable) for exc, _ in retried)
    # past the bounded retries the message stays queued (an unbounded retry), paced at the
    # backoff ceiling, instead of being acked away
    exhausted = retried[-1][1]
    assert exhausted["max_retries"] is None
    assert exhausted["countdown"] >= 2 ** deps.settings.task_max_retries / 2
    assert deps.store.list_rejections() == []  # not recorded as a bug in the store that was down
    assert deps.store.count_messages("s1") == 0
    _run_as(task, deps.settings.task_max_retries, *args)  # the redelivery, once the store is back
    assert deps.store.count_messages("s1") == (len(args[0]) if isinstance(args[0], list) else 1)


@pytest.fixture
def injected(tmp_path):
    env = make_env(tmp_path)
    env.store.db.busy_timeout_s = 0.2
    env.store.db.close()  # the next connection waits 0.2 s for a lock
    worker_deps.set_deps(env)
    yield env
    worker_deps.set_deps(None)
    env.store.close()


def test_a_stage_whose_store_is_locked_retries_then_leaves_the_run_to_the_sweep(injected, tmp_path):
    injected.llm.on("extract_facts", facts(("user", "Alice's email is alice@example.com")))
    run_id = injected.new_run(ALICE_CHAT)
    with locked(tmp_path / "m.db"):
        with pytest.raises(Retried) as retried:
            guarded(FakeTask(retries=1), run_id, "extract_facts", lambda d: stages.extract_facts(run_id, d))
        assert isinstance(retried.value.args[0], StoreUnavailable)
        exhausted = FakeTask(retries=injected.settings.task_max_retries)
        assert guarded(exhausted, run_id, "extract_facts", lambda d: stages.extract_facts(run_id, d)) is None
    run = injected.store.get_run(run_id)
    # nothing was written while the store was down: the run keeps its lease for the sweep
    assert run.status in ("claimed", "running") and run.error is None
    assert guarded(FakeTask(), run_id, "extract_facts", lambda d: stages.extract_facts(run_id, d)) is not None
    assert injected.store.get_run(run_id).stages["extract_facts"].status == "done"


def test_the_stale_run_sweep_retries_while_the_store_is_locked(deps, monkeypatch):
    retried = []
    monkeypatch.setattr(maintenance.retry_stale_runs, "retry",
                        lambda exc=None, **kw: retried.append(exc) or Retried(exc))
    for i in range(1, deps.settings.formation_message_interval + 1):
        ingest.ingest_event.run(_message(i))
    [run] = deps.store.list_runs()
    deps.clock.advance(seconds=deps.settings.claim_lease_s + 1)  # its lease expired: the sweep reopens it
    with locked(Path(deps.settings.store_url[len("sqlite:///"):])):
        with pytest.raises(Retried):
            _run_as(maintenance.retry_stale_runs, 0)
    assert isinstance(retried[0], StoreUnavailable)
    assert _run_as(maintenance.retry_stale_runs, 1)["reopened"] == 1
