"""SIGKILL a worker inside each formation stage, after the stage wrote something; a fresh
worker (or the pool's replacement) finishes every run, and nothing is lost or applied twice
(design §4, §5: every stage is idempotent; acks_late + reject_on_worker_lost)."""

from __future__ import annotations

import pytest

from testkit.scenarios.crash import CONTROL_POINTS, POINTS, run_crash

pytestmark = pytest.mark.integration

STAGES = {"extract_facts", "embed_facts", "decide_facts", "extract_reflections", "consolidate", "finish"}


def test_a_worker_killed_inside_each_stage_loses_and_duplicates_nothing(tmp_path, needs_redis):
    figures = run_crash(tmp_path, sessions=9, kills=6, seed=3, points=POINTS[:6])
    summary = {k: v for k, v in figures.items() if k not in ("kill_log", "samples")}
    assert set(figures["kills_by_stage"]) == STAGES, figures["kill_log"]
    assert figures["kills_confirmed"] == 6, figures["kill_log"]
    assert figures["settled"], summary
    assert figures["formations_completed"] == figures["runs"] > 0, summary
    assert figures["messages_not_ingested"] == 0, summary
    assert (figures["stuck_runs"], figures["dead_runs"], figures["messages_unformed"]) == (0, 0, 0), figures["samples"]
    assert (figures["duplicate_facts"], figures["duplicate_reflections"]) == (0, 0), summary
    assert (figures["lost_reflections"], figures["lost_facts"], figures["leaks"]) == (0, 0, 0), figures["samples"]
    assert figures["facts"] > 0 and figures["reflections"] > 0 and figures["blobs"] > 0, summary
    assert figures["worker_crashes"] == 0


def test_the_audit_sees_duplicates_when_stage_effects_ignore_their_idempotency_keys(tmp_path, needs_redis):
    figures = run_crash(tmp_path, sessions=4, kills=1, seed=5, control=True, points=CONTROL_POINTS[:1])
    assert figures["kills_confirmed"] == 1, figures["kill_log"]
    assert figures["duplicate_facts"] > 0, {k: v for k, v in figures.items() if k != "kill_log"}
