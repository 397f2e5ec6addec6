"""The cold-session sweep and the retry of stale runs (design §4), on the SQLite store with a
frozen clock."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from pipeline import sweep
from pipeline.clock import FrozenClock
from pipeline.ingest import ingest_raw_event
from pipeline.store import open_store
from pipeline.store.mongo import MongoStore
from schemas.settings import Settings
from testkit.mongo_emulation import emulated_database


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(store_url=f"sqlite:///{tmp_path / 'memory.db'}", max_run_attempts=3, claim_lease_s=60,
                    task_soft_time_limit_s=30, task_time_limit_s=50)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture(params=["sqlite", "mongo"])
def handles(request, settings):
    """A factory of store handles on one database (each like another worker's client)."""
    opened = []
    database = emulated_database() if request.param == "mongo" else None

    def open_handle():
        handle = open_store(settings) if database is None else MongoStore(database, prefix=settings.collection_prefix)
        opened.append(handle)
        return handle

    yield open_handle
    for handle in opened:
        handle.close()


@pytest.fixture
def store(handles):
    store = handles()
    store.create_indexes()
    return store


def say(store, settings, clock, session_id: str, n: int, *, agent_id: str = "agent-1", start: int = 0) -> None:
    for i in range(start, start + n):
        event = {
            "type": "message.added", "event_id": f"{session_id}-e{i}", "agent_id": agent_id,
            "session_id": session_id, "session_users": ["u1"],
            "message": {"message_id": f"{session_id}-m{i}", "role": "user", "sender_id": "u1",
                        "content": f"message number {i}", "created_at": clock.now().isoformat()},
        }
        result = ingest_raw_event(event, store, settings, clock)
        assert result.status == "accepted"


@pytest.mark.parametrize(
    ("messages", "idle_minutes", "claimed"),
    [
        (4, 10, True),     # exactly the cold rule's bounds
        (4, 9.9, False),   # not idle long enough
        (3, 60, False),    # too few unformed messages
        (12, 11, True),
        (44, 30, True),    # below the threshold rule, but cold
    ],
)
def test_the_sweep_claims_only_sessions_idle_ten_minutes_with_four_unformed_messages(
    store, settings, clock, messages, idle_minutes, claimed
):
    say(store, settings, clock, "s1", messages)
    clock.advance(minutes=idle_minutes)
    result = sweep.sweep_cold_sessions(store, settings, clock.now())
    assert bool(result.run_ids) is claimed
    if claimed:
        run = store.runs.get_run(result.run_ids[0])
        assert (run.reason, run.seq_from, run.seq_to, run.status) == ("cold", 1, messages, "claimed")


def test_a_claimed_range_is_not_swept_again(store, settings, clock):
    say(store, settings, clock, "s1", 5)
    clock.advance(minutes=15)
    assert len(sweep.sweep_cold_sessions(store, settings, clock.now()).run_ids) == 1
    clock.advance(minutes=15)
    assert sweep.sweep_cold_sessions(store, settings, clock.now()).run_ids == []


def test_the_sweep_works_through_every_batch(store, settings, clock):
    small = settings.model_copy(update={"sweep_batch_size": 3})
    for i in range(8):
        say(store, small, clock, f"s{i}", 4)
    clock.advance(minutes=10)
    result = sweep.sweep_cold_sessions(store, small, clock.now())
    assert sorted(store.runs.get_run(r).session_id for r in result.run_ids) == [f"s{i}" for i in range(8)]


def test_two_sweeps_at_once_claim_each_range_once(store, handles, settings, clock):
    for i in range(30):
        say(store, settings, clock, f"s{i}", 4)
    clock.advance(minutes=10)
    small = settings.model_copy(update={"sweep_batch_size": 7})
    stores = [handles() for _ in range(2)]
    results: list[sweep.SweepResult] = []
    barrier = threading.Barrier(2)

    def run(s):
        barrier.wait()
        results.append(sweep.sweep_cold_sessions(s, small, clock.now()))

    threads = [threading.Thread(target=run, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    run_ids = [r for result in results for r in result.run_ids]
    sessions = [store.runs.get_run(r).session_id for r in run_ids]
    assert len(results) == 2
    assert sorted(sessions) == sorted(f"s{i}" for i in range(30))
    assert len(store.runs.list_runs(limit=1000)) == 30


def test_a_run_whose_lease_expired_is_retried_then_marked_dead_with_its_last_error(store, settings, clock):
    say(store, settings, clock, "s1", 4)
    clock.advance(minutes=10)
    [run_id] = sweep.sweep_cold_sessions(store, settings, clock.now()).run_ids
    # attempt 1 crashes (lease expires); attempt 2 fails with an error; attempt 3 crashes
    clock.advance(seconds=61)
    assert sweep.retry_stale_runs(store.runs, settings, clock.now()).run_ids == [run_id]
    assert store.runs.get_run(run_id).attempts == 2
    store.runs.fail_run(run_id, "LLM timed out", clock.now(), dead=False)
    assert sweep.retry_stale_runs(store.runs, settings, clock.now()).run_ids == [run_id]
    assert store.runs.get_run(run_id).attempts == 3
    store.runs.fail_run(run_id, "LLM timed out again", clock.now(), dead=False)
    result = sweep.retry_stale_runs(store.runs, settings, clock.now())
    assert (result.run_ids, result.dead) == ([], [run_id])
    run = store.runs.get_run(run_id)
    assert run.status == "dead"
    assert run.error == "exhausted 3 attempts: LLM timed out again"


def test_a_live_run_is_not_retried(store, settings, clock):
    say(store, settings, clock, "s1", 4)
    clock.advance(minutes=10)
    sweep.sweep_cold_sessions(store, settings, clock.now())
    clock.advance(seconds=30)  # lease of 60 s still running
    assert sweep.retry_stale_runs(store.runs, settings, clock.now()).run_ids == []


def test_a_dead_range_is_picked_up_by_neither_the_sweep_nor_the_triggers(store, settings, clock):
    say(store, settings, clock, "s1", 4)
    clock.advance(minutes=10)
    [run_id] = sweep.sweep_cold_sessions(store, settings, clock.now()).run_ids
    store.runs.fail_run(run_id, "permanent: bad request", clock.now(), dead=True)
    clock.advance(hours=2)
    assert sweep.sweep_cold_sessions(store, settings, clock.now()).run_ids == []
    assert sweep.retry_stale_runs(store.runs, settings, clock.now()).run_ids == []
    # new messages trigger a run that covers only themselves
    say(store, settings, clock, "s1", 45, start=4)
    runs = [r for r in store.runs.list_runs(session_id="s1") if r.run_id != run_id]
    assert [(r.reason, r.seq_from, r.seq_to) for r in runs] == [("threshold", 5, 49)]
    # the dead run's messages stay stored and unformed
    assert len(store.ingest.get_messages("s1", 1, 4)) == 4
    assert store.runs.get_run(run_id).status == "dead"


def test_retrying_twice_at_once_reopens_a_stale_run_once(store, settings, clock):
    say(store, settings, clock, "s1", 4)
    clock.advance(minutes=10)
    [run_id] = sweep.sweep_cold_sessions(store, settings, clock.now()).run_ids
    clock.advance(seconds=61)
    first = sweep.retry_stale_runs(store.runs, settings, clock.now())
    second = sweep.retry_stale_runs(store.runs, settings, clock.now())
    assert first.run_ids == [run_id] and second.run_ids == []
    assert store.runs.get_run(run_id).attempts == 2
    assert clock.now() + timedelta(seconds=59) < store.runs.get_run(run_id).lease_expires_at
