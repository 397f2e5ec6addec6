"""The producer API (design §3): publish conversation events to the ingest queue.

    from workers.producer import publish_message, publish_messages, end_session

    publish_message(agent_id="a1", session_id="s1", role="user", sender_id="u1",
                    content="My email is alice@example.com")
    publish_messages([{...same keywords...}, ...])   # one queue message, ingested by one task
    end_session(agent_id="a1", session_id="s1")

Publishing is fire-and-forget: a call returns once the broker holds the event (the Redis
write succeeded), never waiting for ingestion or formation. An unreachable broker is retried
``publish_retry_max`` times, then ``TransientError`` is raised: the event was not accepted.

The producer fills in what it owns (``event_id``, ``message_id`` and ``created_at`` when not
given) and validates each event with the model the worker uses (``schemas.events``) before
anything is sent: an event the worker would reject raises ``InvalidInput`` naming the field,
and nothing of that call is published. The worker still validates (producers in other languages
write straight to the queue) and records every invalid event it receives with its raw payload.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from pipeline import names
from pipeline.errors import InvalidInput, TransientError
from pipeline.publisher import Publisher
from schemas import events
from schemas.events import Rejection, parse_event
from schemas.settings import get_settings
from workers.dispatch import send

# A batch bigger than this is split into several queue messages, so one task stays short.
MAX_BATCH = 500


def _new_id() -> str:
    return uuid.uuid4().hex


def message_event(
    *,
    agent_id: str,
    session_id: str,
    content: str,
    role: str = "user",
    sender_id: str | None = None,
    sender_name: str | None = None,
    message_id: str | None = None,
    created_at: datetime | str | None = None,
    event_id: str | None = None,
    agent_name: str | None = None,
    session_users: Sequence[str] | None = None,
    user_tier: int = 0,
    preview: bool = False,
    metadata: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``message.added`` event as a JSON-ready dict (``schemas.events.message_added``), with
    generated ids where none is given."""
    event_id = event_id or _new_id()
    given = {"sender_id": sender_id, "sender_name": sender_name}
    message = {"message_id": message_id or event_id, "role": role, "content": content, "created_at": created_at,
               **{field: value for field, value in given.items() if value is not None}}
    return events.message_added(
        event_id=event_id, agent_id=agent_id, session_id=session_id, message=message,
        session_users=session_users or (), user_tier=user_tier, preview=preview, agent_name=agent_name,
        metadata=metadata,
    )


def session_ended_event(
    *, agent_id: str, session_id: str, event_id: str | None = None, ended_at: datetime | str | None = None
) -> dict[str, Any]:
    """A ``session.ended`` event as a JSON-ready dict (``schemas.events.session_ended``), with a
    generated id when none is given."""
    return events.session_ended(event_id=event_id or _new_id(), agent_id=agent_id, session_id=session_id,
                                ended_at=ended_at)


def _json_ready(value: Any) -> Any:
    return json.loads(json.dumps(value, default=lambda v: v.isoformat() if isinstance(v, datetime) else str(v)))


SHORT_FORM_FIELDS = frozenset(message_event.__kwdefaults__ or {}) | {"agent_id", "session_id", "content"}


def is_short_form(item: Mapping[str, Any]) -> bool:
    """The keyword fields of ``publish_message`` as a dict (no ``type``, no ``message``)."""
    return "message" not in item and "type" not in item


def as_event(item: Any) -> dict[str, Any]:
    """A full event dict from an event model, a full event dict, or the keyword fields of
    ``publish_message`` as a dict, validated as the worker validates it."""
    if isinstance(item, BaseModel):
        return validated(item.model_dump(mode="json", exclude_none=True))
    if not isinstance(item, Mapping):
        raise InvalidInput("event", f"expected an event model or a dict, got {type(item).__name__}")
    if not is_short_form(item):
        event = _json_ready(dict(item))
        event.setdefault("event_id", _new_id())
        return validated(event)
    unknown = set(item) - SHORT_FORM_FIELDS
    if unknown:
        raise InvalidInput("event", f"unknown field(s) {sorted(unknown)} for a message; allowed: {sorted(SHORT_FORM_FIELDS)}")
    missing = {"agent_id", "session_id", "content"} - set(item)
    if missing:
        raise InvalidInput(sorted(missing)[0], "required")
    return validated(_json_ready(message_event(**item)))


def validated(event: dict[str, Any]) -> dict[str, Any]:
    """``event`` when the worker would accept it; else ``InvalidInput`` naming the field(s)."""
    parsed = parse_event(event, max_message_bytes=get_settings().max_message_bytes)
    if isinstance(parsed, Rejection):
        reasons = [(e.field, e.reason.removeprefix("Value error, ")) for e in parsed.errors]
        if len(reasons) == 1:
            raise InvalidInput(*reasons[0])
        raise InvalidInput(", ".join(f for f, _ in reasons), "; ".join(f"{f}: {r}" for f, r in reasons))
    return event


class CeleryPublisher(Publisher):
    """Publishes events as ingest tasks on the broker of a Celery app (``workers.app`` by
    default), over its own connection with socket timeouts."""

    def __init__(self, app=None, *, retry_max: int | None = None, timeout_s: float | None = None) -> None:
        if app is None:
            from workers.app import app as default_app

            app = default_app
        settings = get_settings()
        self.app = app
        self.retry_max = settings.publish_retry_max if retry_max is None else retry_max
        timeout = settings.publish_timeout_s if timeout_s is None else timeout_s
        self._transport_options = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
        self._connection = None
        self._producer = None
        self._lock = threading.Lock()

    def _get_producer(self):
        if self._producer is None:
            self._connection = self.app.connection_for_write(transport_options=self._transport_options)
            self._producer = self.app.amqp.Producer(self._connection, auto_declare=True)
        return self._producer

    def _send(self, name: str, kwargs: dict[str, Any]) -> None:
        with self._lock:
            try:
                send(name, kwargs, app=self.app, producer=self._get_producer(), retry_max=self.retry_max)
            except TransientError as exc:  # the broker stayed unreachable through the retries
                self._reset()
                cause = exc.__cause__ or exc
                raise TransientError(
                    f"the broker at {self._broker_hint()} did not accept the event(s) after "
                    f"{self.retry_max} retries: {cause}"
                ) from cause

    def _broker_hint(self) -> str:
        # the configured URL, password masked
        from kombu.utils.url import maybe_sanitize_url

        return maybe_sanitize_url(self.app.conf.broker_url) or "<broker>"

    def _reset(self) -> None:
        if self._connection is not None:
            try:
                self._connection.release()
            except Exception:  # noqa: BLE001 - the connection is already broken
                pass
        self._connection = self._producer = None

    def publish_one(self, event: dict[str, Any]) -> None:
        self._send(names.TASK_INGEST_EVENT, {"event": event})

    def publish_batch(self, events: Sequence[dict[str, Any]]) -> int:
        for start in range(0, len(events), MAX_BATCH):
            self._send(names.TASK_INGEST_BATCH, {"events": list(events[start:start + MAX_BATCH])})
        return len(events)

    def publish(self, events: Sequence[dict[str, Any]]) -> int:
        if len(events) == 1:
            self.publish_one(events[0])
            return 1
        return self.publish_batch(events)

    def close(self) -> None:
        with self._lock:
            self._reset()


_default: tuple[int, CeleryPublisher] | None = None
_default_lock = threading.Lock()


def default_publisher() -> CeleryPublisher:
    """One publisher per process (rebuilt after a fork: connections are never shared)."""
    global _default
    with _default_lock:
        if _default is None or _default[0] != os.getpid():
            _default = (os.getpid(), CeleryPublisher())
        return _default[1]


def publish_message(*, publisher: CeleryPublisher | None = None, **fields: Any) -> str:
    """Publish one ``message.added`` event (keywords of ``message_event``); returns its event id."""
    event = as_event(fields)
    (publisher or default_publisher()).publish_one(event)
    return event["event_id"]


def publish_messages(items: Iterable[Any], *, publisher: CeleryPublisher | None = None) -> list[str]:
    """Publish many events in one queue message (split past ``MAX_BATCH``); returns event ids.

    Items may be ``MessageAdded``/``SessionEnded`` models, full event dicts, or dicts of the
    keywords of ``publish_message``.
    """
    events = [as_event(item) for item in items]
    if events:
        (publisher or default_publisher()).publish_batch(events)
    return [e["event_id"] for e in events]


def end_session(
    agent_id: str, session_id: str, *, event_id: str | None = None, ended_at: datetime | str | None = None,
    publisher: CeleryPublisher | None = None,
) -> str:
    """Publish ``session.ended``: the session forms what is unformed and consolidates."""
    event = validated(session_ended_event(agent_id=agent_id, session_id=session_id, event_id=event_id, ended_at=ended_at))
    (publisher or default_publisher()).publish_one(event)
    return event["event_id"]
