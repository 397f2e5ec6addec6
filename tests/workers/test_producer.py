"""The producer API: events it builds, what it accepts, and a broker that is not there."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from testkit.publishers import RecordingPublisher as Collected
from testkit.procs import free_port
from pipeline.clock import FrozenClock
from pipeline.errors import InvalidInput, TransientError
from schemas.events import MessageAdded, SessionEnded, parse_event
from schemas.settings import Settings
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


def test_a_messages_metadata_is_published_with_it_and_bad_metadata_is_refused_by_field():
    pub = RecordingPublisher()
    producer.publish_message(publisher=pub, agent_id="a1", session_id="s1", sender_id="u1", content="hi",
                             metadata={"project": "apollo", "tier": 2})
    producer.publish_messages([{"agent_id": "a1", "session_id": "s1", "sender_id": "u1", "content": "yo",
                                "metadata": {"channel": "#ops"}}], publisher=pub)
    assert parsed(pub.singles[0]).metadata == {"project": "apollo", "tier": 2}
    assert parsed(pub.batches[0][0]).metadata == {"channel": "#ops"}
    with pytest.raises(InvalidInput) as refused:
        producer.publish_message(publisher=pub, agent_id="a1", session_id="s1", sender_id="u1", content="hi",
                                 metadata={"tier": 0.5})
    assert refused.value.field == "metadata.tier" and "fraction" in refused.value.reason
    assert len(pub.singles) == 1


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
        ({"agent_id": "a1", "session_id": "s1", "role": "user", "content": "no sender"}, "message.sender_id"),
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


# --------------------------------------------------------------------- one event factory -----
# The producer API and MemoryService (and, through it, the HTTP API and MCP) hand the worker the
# same event for the same message: one wire form, whatever the caller's clock or timezone.
_ZONES = st.sampled_from([None, timezone.utc, timezone(timedelta(hours=2)), timezone(timedelta(hours=-7, minutes=-30))])
_WHEN = st.builds(lambda offset, zone: (T0 + timedelta(seconds=offset)).replace(tzinfo=zone),
                  st.integers(-10**7, 10**7), _ZONES)
_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=40)
_ID = st.text("abcdefghij0123456789-", min_size=1, max_size=12)


def _service(publisher, now):
    from pipeline.service import MemoryService

    return MemoryService("a1", settings=Settings(_env_file=None), publisher=publisher, clock=FrozenClock(now))


@hsettings(max_examples=60, deadline=None)
@given(message_id=_ID, role=st.sampled_from(["user", "assistant", "tool", "system"]), content=_TEXT,
       created_at=st.none() | _WHEN, now=_WHEN.filter(lambda t: t.tzinfo is not None), sender_name=st.none() | _TEXT)
def test_the_service_and_the_producer_publish_the_same_event_for_a_message(
    message_id, role, content, created_at, now, sender_name,
):
    message = {"message_id": message_id, "role": role, "content": content}
    if role == "user":
        message["sender_id"] = "u1"
    if sender_name is not None:
        message["sender_name"] = sender_name
    if created_at is not None:
        message["created_at"] = created_at
    collected = Collected()
    _service(collected, now).maybe_form_memories([message], session_id="s1", session_users=["u1"], user_tier=2)
    [published] = collected.events

    fields = {**message, "created_at": created_at or now}
    built = producer.message_event(agent_id="a1", session_id="s1", event_id=published["event_id"],
                                   session_users=["u1"], user_tier=2, **fields)
    assert published == built
    assert parsed(published) == parsed(built)


@hsettings(max_examples=30, deadline=None)
@given(now=_WHEN.filter(lambda t: t.tzinfo is not None))
def test_the_service_and_the_producer_end_a_session_with_the_same_event(now):
    collected = Collected()
    _service(collected, now).on_session_end(session_id="s1")
    [published] = collected.events
    pub = RecordingPublisher()
    producer.end_session("a1", "s1", event_id=published["event_id"], ended_at=now, publisher=pub)
    assert published == pub.singles[0]
    assert isinstance(parsed(published), SessionEnded)
