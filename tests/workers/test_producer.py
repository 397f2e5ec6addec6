"""The producer API: events it builds, what it accepts, and a broker that is not there."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import pytest

from testkit.procs import free_port
from pipeline.errors import InvalidInput, TransientError
from schemas.events import MessageAdded, SessionEnded, parse_event
from workers import producer

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


class RecordingPublisher:
    def __init__(self):
        self.batches, self.singles = [], []

    def publish_batch(self, events):
        self.batches.append(list(events))
        return len(events)

    def publish_one(self, event):
        self.singles.append(event)


def parsed(event):
    return parse_event(event, max_message_bytes=32768)


def test_publish_message_builds_a_valid_event_with_fresh_ids():
    pub = RecordingPublisher()
    first = producer.publish_message(publisher=pub, agent_id="a1", session_id="s1", sender_id="u1", content="hi")
    second = producer.publish_message(publisher=pub, agent_id="a1", session_id="s1", sender_id="u1", content="hi")
    assert first != second and len(first) == 32
    event = parsed(pub.singles[0])
    assert isinstance(event, MessageAdded)
    assert (event.event_id, event.message.message_id, event.message.role) == (first, first, "user")


def test_given_ids_and_times_are_kept():
    pub = RecordingPublisher()
    producer.publish_message(
        publisher=pub, agent_id="a1", session_id="s1", role="assistant", content="ok",
        event_id="e-1", message_id="m-1", created_at=T0, user_tier=2, preview=True,
    )
    event = parsed(pub.singles[0])
    assert (event.event_id, event.message.message_id, event.message.created_at) == ("e-1", "m-1", T0)
    assert (event.user_tier, event.preview) == (2, True)


def test_publish_messages_sends_one_batch_of_models_dicts_and_keyword_fields():
    pub = RecordingPublisher()
    model = parsed(producer.message_event(agent_id="a1", session_id="s1", sender_id="u1", content="model", event_id="e-m"))
    full = producer.message_event(agent_id="a1", session_id="s1", sender_id="u1", content="dict")
    del full["event_id"]
    flat = {"agent_id": "a1", "session_id": "s1", "sender_id": "u1", "content": "flat", "created_at": T0}
    ids = producer.publish_messages([model, full, flat], publisher=pub)
    [batch] = pub.batches
    assert [e["event_id"] for e in batch] == ids and ids[0] == "e-m"
    assert all(isinstance(parsed(e), MessageAdded) for e in batch)
    assert [e["message"]["content"] for e in batch] == ["model", "dict", "flat"]


@pytest.mark.parametrize(
    ("item", "field"),
    [
        ({"agent_id": "a1", "session_id": "s1", "role": "narrator", "content": "x"}, "message.role"),
        ({"agent_id": "a1", "session_id": "s1", "role": "user", "content": "no sender"}, "message"),
        ({"agent_id": "a1", "session_id": "s1", "sender_id": "u1", "content": "x", "user_tier": -1}, "user_tier"),
        ({"agent_id": "a1", "session_id": "s1", "content": "x", "sender_id": "u1", "session_users": ["u2"]}, "<event>"),
        ({"session_id": "s1", "content": "x"}, "agent_id"),
    ],
)
def test_what_the_worker_would_reject_is_refused_before_anything_is_sent(item, field):
    pub = RecordingPublisher()
    good = {"agent_id": "a1", "session_id": "s1", "sender_id": "u1", "content": "fine"}
    with pytest.raises(InvalidInput) as refused:
        producer.publish_messages([good, item], publisher=pub)
    assert refused.value.field == field
    assert pub.batches == [] and pub.singles == []
    with pytest.raises(InvalidInput):
        producer.publish_message(publisher=pub, **item)
    assert pub.singles == []


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        ("a string", "expected an event model or a dict"),
        ({"agent_id": "a1", "session_id": "s1", "content": "x", "colour": "red"}, re.escape("unknown field(s) ['colour']")),
    ],
)
def test_things_that_are_not_events_are_refused_before_publishing(item, reason):
    pub = RecordingPublisher()
    with pytest.raises(InvalidInput, match=reason):
        producer.publish_messages([item], publisher=pub)
    assert pub.batches == []


def test_end_session_publishes_session_ended():
    pub = RecordingPublisher()
    event_id = producer.end_session("a1", "s1", publisher=pub)
    event = parsed(pub.singles[0])
    assert isinstance(event, SessionEnded) and event.event_id == event_id


def test_an_unreachable_broker_is_a_transient_error_after_the_retries():
    from celery import Celery

    app = Celery("unreachable", broker=f"redis://127.0.0.1:{free_port()}/0")
    publisher = producer.CeleryPublisher(app, retry_max=1, timeout_s=1)
    with pytest.raises(TransientError, match="did not accept the event"):
        producer.publish_message(publisher=publisher, agent_id="a1", session_id="s1", sender_id="u1", content="hi")
