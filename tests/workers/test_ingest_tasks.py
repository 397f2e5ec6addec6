"""The ingest tasks' hand-on: what they enqueue after an event, against a recording broker."""

from __future__ import annotations

import json
import logging

import pytest

from pipeline import names
from pipeline.ingest_results import END_DEFERRAL_BASE_S, MAX_END_DEFERRALS
from pipeline.store.sqlite import SQLiteStore
from pipeline.store.sqlite.ingest import SQLiteIngest
from workers import ingest
from workers.app import app


@pytest.fixture
def deps(worker_deps):
    return worker_deps()


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
    run = deps.store.runs.get_run(kwargs["run_id"])
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
        (names.TASK_INGEST_EVENT, {"event": END, "deferrals": 1}, END_DEFERRAL_BASE_S),
        (names.TASK_INGEST_EVENT, {"event": END, "deferrals": 4}, END_DEFERRAL_BASE_S * 8),
    ]


def test_session_end_stops_waiting_for_messages_after_the_last_deferral(deps, sent):
    ingest.ingest_event.run(END, deferrals=MAX_END_DEFERRALS)
    assert sent == []


def test_noop_does_nothing(deps, sent):
    assert ingest.noop.run() is None
    assert sent == []


class PoisonIngest(SQLiteIngest):
    """Fails with a programming error on any write that holds one given event, quoting the
    message's content in the error as careless code would."""

    poison = "e3"

    def ingest_messages(self, messages, now):
        for m in messages:
            if m.event_id == self.poison:
                raise RuntimeError(f"unexpected state while storing {m.content!r}")
        return super().ingest_messages(messages, now)


class PoisonStore(SQLiteStore):
    REPOSITORIES = {**SQLiteStore.REPOSITORIES, "ingest": PoisonIngest}


SECRET = "the vault code is 90210"


@pytest.fixture
def poisoned(deps):
    deps.store.close()
    deps.__dict__["store"] = PoisonStore(deps.settings.store_url.removeprefix("sqlite:///"))
    return deps


def _logged(caplog) -> str:
    return "\n".join(r.getMessage() for r in caplog.records)


def test_unexpected_error_in_a_batch_records_the_event_fails_the_task_and_keeps_the_rest(poisoned, sent, caplog):
    events = [_message(i, poisoned.clock.now()) for i in range(1, 6)]
    events[2]["message"]["content"] = SECRET
    with caplog.at_level(logging.INFO), pytest.raises(ingest.IngestFailed) as failed:
        ingest.ingest_batch.run(events)
    assert poisoned.store.ingest.count_messages("s1") == 4
    [recorded] = poisoned.store.ingest.list_rejections()
    assert (recorded.event_id, json.loads(recorded.raw)) == ("e3", events[2])
    assert recorded.errors[0]["field"] == "<internal>"
    assert recorded.errors[0]["reason"].startswith("internal error: RuntimeError: unexpected state")
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "e3" in errors[0].getMessage() and "ingest_messages" in errors[0].getMessage()
    assert "90210" not in _logged(caplog) and "90210" not in str(failed.value) and "90210" not in recorded.errors[0]["reason"]
    assert failed.value.__cause__ is None and failed.value.__suppress_context__


def test_unexpected_error_on_one_event_records_it_and_fails_the_task(poisoned, sent, caplog):
    event = _message(3, poisoned.clock.now())
    event["message"]["content"] = SECRET
    with caplog.at_level(logging.INFO), pytest.raises(ingest.IngestFailed):
        ingest.ingest_event.run(event)
    [recorded] = poisoned.store.ingest.list_rejections()
    assert json.loads(recorded.raw) == event and recorded.errors[0]["field"] == "<internal>"
    assert poisoned.store.ingest.get_session("s1") is None
    assert "90210" not in _logged(caplog)
    assert any(r.levelno == logging.ERROR for r in caplog.records)
