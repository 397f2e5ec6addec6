"""A broker restart in the middle of ingest (design §3: "A producer is told an event is accepted
only once the broker holds it"): no event the producer was told is accepted is lost.

Redis may execute and persist a consumer's pop and stop before it answers it; kombu's BRPOP
then loses that message. The single-queue workers pop and record it atomically instead
(``workers/transport.py``); the scenario still tells such losses apart, from the append-only
file, should they come back."""

from __future__ import annotations

import pytest

from testkit.scenarios.outage import run_broker_outage

pytestmark = pytest.mark.integration


def test_no_event_the_producer_was_told_is_accepted_is_lost_when_redis_restarts(tmp_path, needs_redis):
    figures = run_broker_outage(tmp_path, events=150, sessions=4, downtimes=(1.0, 4.0), seed=11)
    assert figures["redis_restarts"] == 2
    assert figures["drained"], figures
    assert (figures["lost"], figures["lost_to_unanswered_pops"]) == (0, 0), figures
    assert figures["stored"] == figures["told_accepted"]
    # every publish either succeeded or raised the pipeline's clear TransientError
    assert figures["told_accepted"] + figures["clear_errors"] == figures["publish_calls"]
    assert figures["unclear_errors"] == 0, figures["error_sample"]
    assert figures["clear_errors"] > 0, "a 4 s outage outlasts the producer's retries: it must be told"
    assert all("did not accept" in e for e in figures["error_sample"]), figures["error_sample"]
    assert figures["worker_crashes"] == 0, figures["worker_crash_reasons"]


def test_a_crashed_redis_loses_no_accepted_event_either(tmp_path, needs_redis):
    figures = run_broker_outage(tmp_path, events=120, sessions=3, downtimes=(1.0, 1.0), seed=12, crash=True)
    assert figures["restart_signal"] == "SIGKILL" and figures["drained"], figures
    assert (figures["lost"], figures["lost_to_unanswered_pops"]) == (0, 0), figures
    assert figures["worker_crashes"] == 0, figures["worker_crash_reasons"]
