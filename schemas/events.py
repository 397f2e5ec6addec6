"""Producer events (design §3): versioned pydantic models that travel as JSON.

``message_added`` and ``session_ended`` build an event as the JSON-ready dict that travels:
the one place a conversation event is built, for the producer API (``workers.producer``) and
``MemoryService`` (and, through it, the HTTP API and MCP). ``parse_event`` turns a raw payload
(dict, JSON text or bytes) into an event or a ``Rejection`` that says which field is wrong and
why. It never raises on bad input.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

# ``Id`` is imported from here too: an event's ids are the ids every door takes
from schemas.metadata import EventMetadata
from schemas.values import Id, InSpan, TextChars, check_instant

SCHEMA_VERSION = 1

#: a name a producer gives (a sender's, an agent's): free text up to 256 characters
Name = Annotated[str, StringConstraints(max_length=256), TextChars]
#: when something happened: a naive time is read as UTC, and it must lie in the accepted span
When = Annotated[datetime, InSpan]
Role = Literal["user", "assistant", "tool", "system"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=False)


class ChatMessage(_Strict):
    message_id: Id
    role: Role
    sender_id: Id | None = Field(default=None, validate_default=True)
    sender_name: Name | None = None
    content: Annotated[str, TextChars]
    created_at: When

    @field_validator("sender_id")
    @classmethod
    def _user_has_sender(cls, value: str | None, info: ValidationInfo) -> str | None:
        # a field check, not a model check, so that the error names sender_id
        if info.data.get("role") == "user" and not value:
            raise PydanticCustomError("sender_required", "required when role is 'user' (the human who wrote it)")
        return value


class MessageAdded(_Strict):
    type: Literal["message.added"] = "message.added"
    schema_version: Literal[1] = SCHEMA_VERSION
    event_id: Id
    agent_id: Id
    agent_name: Name | None = None
    session_id: Id
    message: ChatMessage
    session_users: list[Id] = Field(default_factory=list, max_length=1000)
    user_tier: Annotated[int, Field(ge=0, le=100)] = 0
    preview: bool = False
    # what the platform knows of the message (channel, project, ...): facts keep the keys
    # the agent's owner marks filterable (``schemas.metadata``)
    metadata: EventMetadata = Field(default_factory=dict)

    @model_validator(mode="after")
    def _sender_in_session(self) -> "MessageAdded":
        sender = self.message.sender_id
        if self.message.role == "user" and sender and self.session_users and sender not in self.session_users:
            raise ValueError("message.sender_id is not one of session_users")
        return self

    @property
    def humans(self) -> list[str]:
        """The humans of the session: the declared ones, plus the sender of a user message."""
        users = list(dict.fromkeys(self.session_users))
        if self.message.role == "user" and self.message.sender_id and self.message.sender_id not in users:
            users.append(self.message.sender_id)
        return users


#: the fields of one message as a producer gives it (``ChatMessage``)
MESSAGE_FIELDS = tuple(ChatMessage.model_fields)


class SessionEnded(_Strict):
    type: Literal["session.ended"] = "session.ended"
    schema_version: Literal[1] = SCHEMA_VERSION
    event_id: Id
    agent_id: Id
    session_id: Id
    ended_at: When | None = None


Event = Annotated[Union[MessageAdded, SessionEnded], Field(discriminator="type")]
_EVENT = TypeAdapter(Event)
#: namespace of the event ids derived from what an event is about (``stable_event_id``)
_EVENT_NS = uuid.UUID("5b2f7c1e-9a43-4f0e-8d65-3c1a0e7b9d21")


def stable_event_id(kind: str, agent_id: str, session_id: str, key: str) -> str:
    """An event id derived from what the event is about (``kind`` of event and ``key``, e.g. a
    message id), so that publishing the same message twice is deduplicated by the worker."""
    return uuid.uuid5(_EVENT_NS, f"{kind}\x1f{agent_id}\x1f{session_id}\x1f{key}").hex


def _iso(value: Any) -> Any:
    """A datetime as ISO 8601 in UTC (a naive one is taken as UTC, as the worker takes it);
    anything else, or a time outside the span, as given, for ``parse_event`` to judge."""
    if not isinstance(value, datetime):
        return value
    try:
        return check_instant(value).isoformat()
    except ValueError:
        return value.isoformat()


def message_added(
    *, event_id: str, agent_id: str, session_id: str, message: Mapping[str, Any], now: datetime | None = None,
    session_users: Iterable[str] = (), user_tier: int = 0, preview: bool = False, agent_name: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``message.added`` event as the JSON-ready dict that travels. ``message`` holds
    ``MESSAGE_FIELDS``; a missing (or None) ``created_at`` is ``now`` (default: the wall clock);
    ``metadata``: what the platform knows of the message (``schemas.metadata``).
    Not validated here: ``parse_event`` judges the result exactly as the worker will, so a
    field that does not belong is kept for it to name."""
    body = dict(message)
    if body.get("created_at") is None:
        body["created_at"] = now or datetime.now(timezone.utc)
    body["created_at"] = _iso(body["created_at"])
    event: dict[str, Any] = {
        "type": "message.added", "schema_version": SCHEMA_VERSION, "event_id": event_id, "agent_id": agent_id,
        "session_id": session_id, "message": body, "session_users": list(session_users), "user_tier": user_tier,
        "preview": preview,
    }
    if agent_name is not None:
        event["agent_name"] = agent_name
    if metadata is not None:
        # kept as given (not copied key by key): ``parse_event`` names what is wrong in it
        event["metadata"] = dict(metadata) if isinstance(metadata, Mapping) else metadata
    return event


def session_ended(
    *, event_id: str, agent_id: str, session_id: str, ended_at: datetime | str | None = None,
) -> dict[str, Any]:
    """A ``session.ended`` event as the JSON-ready dict that travels (``ended_at`` left out
    when not given: the worker then takes the time it ingests the event)."""
    event: dict[str, Any] = {
        "type": "session.ended", "schema_version": SCHEMA_VERSION, "event_id": event_id, "agent_id": agent_id,
        "session_id": session_id,
    }
    if ended_at is not None:
        event["ended_at"] = _iso(ended_at)
    return event


class FieldError(BaseModel):
    """One reason an event was rejected: where (a dotted path) and why."""

    field: str
    reason: str


class Rejection(BaseModel):
    """A structured rejection: the raw payload is kept beside it when it is recorded."""

    event_id: str | None = None
    errors: list[FieldError]

    def summary(self) -> str:
        return "; ".join(f"{e.field}: {e.reason}" for e in self.errors)


def _loc(loc: tuple[Any, ...]) -> str:
    # Drop the discriminator tag pydantic inserts ("message.added") from the path, and the
    # "[key]" it appends when a dict's key (not its value) is wrong: the key is the field.
    parts = [str(p) for p in loc if p not in ("message.added", "session.ended", "[key]")]
    return ".".join(parts) or "<event>"


def parse_event(raw: Any, *, max_message_bytes: int) -> MessageAdded | SessionEnded | Rejection:
    """Validate one raw event. Oversized content is rejected, never truncated."""
    if isinstance(raw, (bytes, bytearray)):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return Rejection(errors=[FieldError(field="<event>", reason=f"not UTF-8: {exc.reason}")])
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            return Rejection(errors=[FieldError(field="<event>", reason=f"not JSON: {exc.msg} at {exc.pos}")])
        except RecursionError:
            return Rejection(errors=[FieldError(field="<event>", reason="JSON nested deeper than the parser reads")])
    if not isinstance(raw, dict):
        return Rejection(errors=[FieldError(field="<event>", reason=f"expected a JSON object, got {type(raw).__name__}")])
    event_id = raw.get("event_id") if isinstance(raw.get("event_id"), str) else None
    if raw.get("type") not in ("message.added", "session.ended"):
        reason = "missing" if "type" not in raw else f"unknown event type {str(raw.get('type'))[:64]!r}"
        return Rejection(
            event_id=event_id,
            errors=[FieldError(field="type", reason=f"{reason}; expected 'message.added' or 'session.ended'")],
        )
    if raw.get("schema_version", SCHEMA_VERSION) != SCHEMA_VERSION:
        return Rejection(
            event_id=event_id,
            errors=[FieldError(field="schema_version", reason=f"unsupported version {raw.get('schema_version')!r}; this build reads {SCHEMA_VERSION}")],
        )
    try:
        event = _EVENT.validate_python(raw)
    except ValidationError as exc:
        errors = [FieldError(field=_loc(e["loc"]), reason=e["msg"]) for e in exc.errors(include_url=False)]
        return Rejection(event_id=event_id, errors=errors)
    if isinstance(event, MessageAdded):
        size = len(event.message.content.encode("utf-8"))
        if size > max_message_bytes:
            return Rejection(
                event_id=event_id,
                errors=[FieldError(field="message.content", reason=f"{size} bytes is over the {max_message_bytes}-byte limit")],
            )
    return event
