"""Producer events (design §3): versioned pydantic models that travel as JSON.

``parse_event`` turns a raw payload (dict, JSON text or bytes) into an event or a
``Rejection`` that says which field is wrong and why. It never raises on bad input.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

SCHEMA_VERSION = 1

# Opaque ids: ObjectId hex, UUIDs, anything printable up to 128 characters.
Id = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"^[^\x00-\x1f\x7f]+$")]
Role = Literal["user", "assistant", "tool", "system"]


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=False)


class ChatMessage(_Strict):
    message_id: Id
    role: Role
    sender_id: Id | None = None
    sender_name: Annotated[str, StringConstraints(max_length=256)] | None = None
    content: str
    created_at: datetime

    @field_validator("created_at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return _aware(value).astimezone(timezone.utc)

    @field_validator("content")
    @classmethod
    def _no_nul(cls, value: str) -> str:
        if "\x00" in value:
            raise ValueError("content contains a NUL character")
        return value

    @model_validator(mode="after")
    def _user_has_sender(self) -> "ChatMessage":
        if self.role == "user" and not self.sender_id:
            raise ValueError("a message with role 'user' needs sender_id (the human who wrote it)")
        return self


class MessageAdded(_Strict):
    type: Literal["message.added"] = "message.added"
    schema_version: Literal[1] = SCHEMA_VERSION
    event_id: Id
    agent_id: Id
    agent_name: Annotated[str, StringConstraints(max_length=256)] | None = None
    session_id: Id
    message: ChatMessage
    session_users: list[Id] = Field(default_factory=list, max_length=1000)
    user_tier: Annotated[int, Field(ge=0, le=100)] = 0
    preview: bool = False

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


class SessionEnded(_Strict):
    type: Literal["session.ended"] = "session.ended"
    schema_version: Literal[1] = SCHEMA_VERSION
    event_id: Id
    agent_id: Id
    session_id: Id
    ended_at: datetime | None = None


Event = Annotated[Union[MessageAdded, SessionEnded], Field(discriminator="type")]
_EVENT = TypeAdapter(Event)


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
    # Drop the discriminator tag pydantic inserts ("message.added") from the path.
    parts = [str(p) for p in loc if p not in ("message.added", "session.ended")]
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
