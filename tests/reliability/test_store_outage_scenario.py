"""The store becomes unavailable for several seconds while producers publish and formations
run: SQLite locked by another process past the busy timeout, or the Mongo emulation failing
as a failover does. Every accepted event is stored and every run finishes (design §11)."""

from __future__ import annotations

import pytest

from testkit.scenarios.store_outage import run_mongo_failover, run_sqlite_lock

pytestmark = pytest.mark.integration


def _assert_nothing_lost_or_stuck(figures: dict) -> None:
    summary = {k: v for k, v in figures.items() if k != "samples"}
    assert figures["store_errors"] > 0, summary  # the outage hit the pipeline: ingest and formations
    assert set(figures["store_errors_by_task"]) - {"ingest_batch", "ingest_event"}, summary
    assert figures["settled"], summary
    assert figures["told_accepted"] > 0 and figures["lost"] == 0, summary
    assert (figures["stuck_runs"], figures["dead_runs"], figures["messages_unformed"]) == (0, 0, 0), summary
    assert figures["formations_completed"] == figures["runs"] > 0, summary
    assert (figures["duplicate_facts"], figures["duplicate_reflections"], figures["lost_facts"]) == (0, 0, 0), summary
    assert figures["worker_crashes"] == 0, summary


def test_a_sqlite_lock_held_past_the_busy_timeout_loses_no_event_and_strands_no_run(tmp_path, needs_redis):
    figures = run_sqlite_lock(tmp_path, sessions=10, lock_s=9.0, seed=1)
    assert figures["outage_s"] > figures["busy_timeout_s"]
    _assert_nothing_lost_or_stuck(figures)


def test_a_mongo_failover_loses_no_event_and_strands_no_run(tmp_path, needs_redis):
    figures = run_mongo_failover(tmp_path, sessions=10, outage_s=7.0, seed=1)
    _assert_nothing_lost_or_stuck(figures)
