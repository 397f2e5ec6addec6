"""A broker crash in the middle of ingest loses no event the producer was told is accepted
(SPEC §3: "A producer is told an event is accepted only once the broker holds it")."""

from __future__ import annotations

import pytest

from ops.bench._outage import run_broker_outage

pytestmark = pytest.mark.integration


def test_every_event_the_producer_was_told_is_accepted_is_stored_after_redis_restarts(tmp_path, needs_redis):
    figures = run_broker_outage(tmp_path, events=150, sessions=4, downtimes=(1.0, 5.0), seed=11)
    assert figures["redis_restarts"] == 2
    assert figures["drained"], figures
    assert figures["lost"] == 0, figures
    assert figures["stored"] == figures["told_accepted"]
    # every publish either succeeded or raised the pipeline's clear TransientError
    assert figures["told_accepted"] + figures["clear_errors"] == figures["publish_calls"]
    assert figures["unclear_errors"] == 0, figures["error_sample"]
    assert figures["clear_errors"] > 0, "a 5 s outage outlasts the producer's retries: it must be told"
    assert all("did not accept" in e for e in figures["error_sample"]), figures["error_sample"]
    assert figures["worker_crashes"] == 0, figures["worker_crash_reasons"]
