"""parse_event: every bad payload gets a structured rejection naming the field and the reason."""

from __future__ import annotations

import json

import pytest

from schemas.events import MessageAdded, Rejection, SessionEnded, parse_event

LIMIT = 32 * 1024
GOOD = {
    "type": "message.added", "event_id": "e1", "agent_id": "a1", "session_id": "s1",
    "session_users": ["u1"],
    "message": {"message_id": "m1", "role": "user", "sender_id": "u1", "content": "hi",
                "created_at": "2026-01-01T10:00:00Z"},
}


def _with(**changes):
    event = json.loads(json.dumps(GOOD))
    for path, value in changes.items():
        target = event
        *parents, leaf = path.split("__")
        for key in parents:
            target = target[key]
        if value is KeyError:
            target.pop(leaf)
        else:
            target[leaf] = value
    return event


def test_a_valid_message_and_a_session_end_parse_to_their_models():
    assert isinstance(parse_event(GOOD, max_message_bytes=LIMIT), MessageAdded)
    end = {"type": "session.ended", "event_id": "e2", "agent_id": "a1", "session_id": "s1"}
    assert isinstance(parse_event(json.dumps(end), max_message_bytes=LIMIT), SessionEnded)


@pytest.mark.parametrize(("raw", "field", "reason"), [
    (_with(type=KeyError), "type", "missing"),
    (_with(type="message.deleted"), "type", "unknown event type 'message.deleted'"),
    (_with(event_id=KeyError), "event_id", "Field required"),
    (_with(message__role="robot"), "message.role", "Input should be"),
    (_with(message__content="x" * (LIMIT + 1)), "message.content", "over the 32768-byte limit"),
    (_with(message__sender_id=KeyError), "message.sender_id", "required when role is 'user'"),
    (_with(session_id="s\x00"), "session_id", "a NUL character, at character 1"),
    (_with(schema_version=2), "schema_version", "unsupported version 2"),
    # a bad key is named as the field itself (pydantic appends "[key]" to the path)
    (_with(metadata={"2fast": 1}), "metadata.2fast", "is not a metadata key"),
    ("{not json", "<event>", "not JSON"),
    (b"\xff\xfe", "<event>", "not UTF-8"),
    ([1, 2], "<event>", "expected a JSON object, got list"),
])
def test_bad_events_are_rejected_with_the_field_and_the_reason(raw, field, reason):
    result = parse_event(raw, max_message_bytes=LIMIT)
    assert isinstance(result, Rejection)
    assert any(e.field == field and reason in e.reason for e in result.errors), result.errors


def test_the_http_api_takes_exactly_the_fields_of_an_events_message():
    # the API's request body is its own model (its OpenAPI document is pinned); a field added
    # to the event's message and not to the API would be refused there
    from schemas.api import MessageIn
    from schemas.events import MESSAGE_FIELDS

    # ... and the message's metadata, which the event carries beside the message
    assert set(MessageIn.model_fields) == {*MESSAGE_FIELDS, "metadata"}


def test_an_event_built_with_metadata_carries_it_to_the_model():
    from schemas.events import message_added

    event = message_added(event_id="e1", agent_id="a1", session_id="s1", metadata={"project": "apollo", "tier": 2,
                                                                                   "beta": True},
                          message={"message_id": "m1", "role": "assistant", "content": "hi"})
    parsed = parse_event(json.loads(json.dumps(event)), max_message_bytes=LIMIT)
    assert parsed.metadata == {"project": "apollo", "tier": 2, "beta": True}
    assert parse_event(GOOD, max_message_bytes=LIMIT).metadata == {}
