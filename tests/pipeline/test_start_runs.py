"""``sweep.start_runs``: a claimed run whose start fails is released, never stranded."""

from __future__ import annotations

import pytest

from pipeline import sweep
from pipeline.clock import FrozenClock
from pipeline.errors import TransientError
from pipeline.store import open_store
from schemas.settings import Settings
from testkit.sessions import ingest_messages


@pytest.fixture
def claimed(tmp_path):
    settings, clock = Settings(store_url=f"sqlite:///{tmp_path / 'memory.db'}"), FrozenClock()
    store = open_store(settings)
    store.create_indexes()
    for session_id in ("s1", "s2", "s3"):
        ingest_messages(store, settings, clock, session_id, content="hi")
    clock.advance(minutes=10)
    run_ids = sweep.sweep_cold_sessions(store, settings, clock.now()).run_ids
    yield store, clock, sorted(run_ids)
    store.close()


def test_runs_after_a_refused_start_are_released_with_the_reason(claimed):
    store, clock, run_ids = claimed
    started = []

    def start(run_id):
        if started:
            raise TransientError("the broker at redis://h:6379/0 did not accept memory.extract_facts")
        started.append(run_id)

    with pytest.raises(TransientError, match=f"run\\(s\\) {run_ids[1]}, {run_ids[2]} marked failed"):
        sweep.start_runs(store.runs, run_ids, start, clock.now())
    assert store.runs.get_run(run_ids[0]).status == "claimed"
    for run_id in run_ids[1:]:
        run = store.runs.get_run(run_id)
        assert run.status == "failed" and run.error.startswith("not started: TransientError: the broker")
        assert store.ingest.get_session(run.session_id).active_run_id is None


def test_the_stale_run_retry_starts_a_released_run_again(claimed):
    store, clock, run_ids = claimed

    def refuse(run_id):
        raise TransientError("broker gone")

    with pytest.raises(TransientError):
        sweep.start_runs(store.runs, run_ids, refuse, clock.now())
    reopened = sweep.retry_stale_runs(store.runs, Settings(), clock.now()).run_ids
    assert sorted(reopened) == run_ids


def test_a_programming_error_in_a_start_still_releases_and_propagates_as_is(claimed):
    store, clock, run_ids = claimed
    with pytest.raises(KeyError):
        sweep.start_runs(store.runs, run_ids[:1], lambda run_id: {}["x"], clock.now())
    assert store.runs.get_run(run_ids[0]).status == "failed"


class _RunsThatCannotFail:
    """The real runs, except that the store is gone when asked to release one."""

    def __init__(self, runs):
        self._runs = runs

    def fail_run(self, *args, **kwargs):
        raise ConnectionError("store unreachable")

    def __getattr__(self, name):
        return getattr(self._runs, name)


def test_a_start_that_fails_while_the_store_is_gone_reports_the_send_and_leaves_the_lease(claimed, caplog):
    store, clock, run_ids = claimed

    def refuse(run_id):
        raise TransientError("the broker at redis://h:6379/0 did not accept memory.extract_facts")

    with pytest.raises(TransientError, match="did not accept"):
        sweep.start_runs(_RunsThatCannotFail(store.runs), run_ids[:1], refuse, clock.now())
    assert store.runs.get_run(run_ids[0]).status == "claimed"  # the lease expiry hands it to the stale-run retry
    assert "not released either (ConnectionError: store unreachable)" in caplog.text
