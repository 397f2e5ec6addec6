"""session.ended: whatever remains is formed; with nothing left to form, the session's
leftover reflection buffers are consolidated, unless a live run of the session will do it."""

from __future__ import annotations

import pytest

from pipeline import names
from pipeline.ingest import ingest_raw_event
from workers import ingest


@pytest.fixture
def deps(worker_deps):
    return worker_deps(claim_lease_s=60, task_soft_time_limit_s=30, task_time_limit_s=50)


def _message(i: int, session_id: str = "s1", now=None) -> dict:
    return {
        "type": "message.added", "event_id": f"e{i}", "agent_id": "a1", "session_id": session_id,
        "message": {"message_id": f"m{i}", "role": "user", "sender_id": "u1", "content": "I live in Porto",
                    "created_at": now.isoformat()},
    }


def _end(session_id: str = "s1", event_id: str = "end") -> dict:
    return {"type": "session.ended", "event_id": event_id, "agent_id": "a1", "session_id": session_id}


def _deliver(deps, raw):
    result = ingest_raw_event(raw, deps.store, deps.settings, deps.clock)
    ingest.hand_on(result, raw)
    return result


def test_session_end_forms_whatever_remains_even_one_message(deps, sent):
    _deliver(deps, _message(1, now=deps.clock.now()))
    result = _deliver(deps, _end())
    assert result.run is not None and (result.run.reason, result.run.seq_from, result.run.seq_to) == ("session_end", 1, 1)
    assert sent == [(names.TASK_EXTRACT_FACTS, {"run_id": result.run.run_id})]


def test_session_end_with_nothing_left_to_form_consolidates_the_leftovers(deps, sent):
    _deliver(deps, _message(1, now=deps.clock.now()))
    first = _deliver(deps, _end())
    deps.store.runs.finish_run(first.run.run_id, deps.clock.now(), {}, [])
    sent.clear()
    _deliver(deps, _end(event_id="end-again"))
    assert sent == [(names.TASK_CONSOLIDATE_SESSION, {"agent_id": "a1", "session_id": "s1"})]


def test_session_end_leaves_consolidation_to_a_live_run_of_the_session(deps, sent):
    for i in range(45):
        _deliver(deps, _message(i, now=deps.clock.now()))
    [(name, kwargs)] = sent
    assert name == names.TASK_EXTRACT_FACTS  # the threshold run holds every message
    sent.clear()
    _deliver(deps, _end())
    assert sent == []


def test_session_end_after_a_crashed_run_consolidates_once_its_lease_expired(deps, sent):
    for i in range(45):
        _deliver(deps, _message(i, now=deps.clock.now()))
    sent.clear()
    deps.clock.advance(seconds=61)
    _deliver(deps, _end())
    assert sent == [(names.TASK_CONSOLIDATE_SESSION, {"agent_id": "a1", "session_id": "s1"})]
