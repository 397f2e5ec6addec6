"""The ingest tasks' hand-on: what they enqueue after an event, against a recording broker."""

from __future__ import annotations

import pytest

from pipeline import names
from pipeline.clock import FrozenClock
from schemas.settings import Settings
from workers import ingest
from workers.app import app
from workers.deps import Deps, set_deps


@pytest.fixture
def deps(tmp_path):
    d = Deps(Settings(store_url=f"sqlite:///{tmp_path / 'memory.db'}"))
    d.__dict__["clock"] = FrozenClock()
    set_deps(d)
    yield d
    set_deps(None)
    d.store.close()


@pytest.fixture
def sent(monkeypatch):
    calls: list[tuple[str, dict, float | None]] = []
    monkeypatch.setattr(
        app, "send_task", lambda name, kwargs=None, countdown=None, **_: calls.append((name, kwargs, countdown))
    )
    return calls


def _message(i: int, now) -> dict:
    return {
        "type": "message.added", "event_id": f"e{i}", "agent_id": "a1", "session_id": "s1",
        "message": {"message_id": f"m{i}", "role": "assistant", "content": "ok", "created_at": now.isoformat()},
    }


END = {"type": "session.ended", "event_id": "end", "agent_id": "a1", "session_id": "s1"}


def test_ingest_event_starts_formation_with_the_claimed_run_id(deps, sent):
    for i in range(1, 46):
        ingest.ingest_event.run(_message(i, deps.clock.now()))
    [(name, kwargs, _)] = sent
    run = deps.store.get_run(kwargs["run_id"])
    assert name == names.TASK_EXTRACT_FACTS
    assert (run.reason, run.seq_from, run.seq_to) == ("threshold", 1, 45)


def test_ingest_batch_counts_each_outcome_and_starts_formation_once(deps, sent):
    events = [_message(i, deps.clock.now()) for i in range(1, 46)] + [_message(1, deps.clock.now()), "{bad"]
    summary = ingest.ingest_batch.run(events)
    assert summary == {"accepted": 45, "duplicate": 1, "rejected": 1, "runs": 1}
    assert [name for name, _, _ in sent] == [names.TASK_EXTRACT_FACTS]


def test_session_end_before_its_messages_is_delivered_again_later_with_growing_delays(deps, sent):
    ingest.ingest_event.run(END)
    ingest.ingest_event.run(END, deferrals=3)
    assert sent == [
        (names.TASK_INGEST_EVENT, {"event": END, "deferrals": 1}, ingest.END_DEFERRAL_BASE_S),
        (names.TASK_INGEST_EVENT, {"event": END, "deferrals": 4}, ingest.END_DEFERRAL_BASE_S * 8),
    ]


def test_session_end_stops_waiting_for_messages_after_the_last_deferral(deps, sent):
    ingest.ingest_event.run(END, deferrals=ingest.MAX_END_DEFERRALS)
    assert sent == []


def test_noop_does_nothing(deps, sent):
    assert ingest.noop.run() is None
    assert sent == []
