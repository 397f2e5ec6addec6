"""Recording what ingest refuses (design §3): an invalid event, one the store refused, or one
whose ingest failed on an unexpected error goes to the rejected-events record with its raw
payload as received and ``[{field, reason}]``, so that an operator sees it. None is retried;
one that failed on an unexpected error can be replayed (``memoryctl replay-rejected``) once
its cause is fixed."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

from pipeline.ingest_results import IngestResult
from pipeline.store.port import IngestStore
from schemas.documents import RejectedEvent
from schemas.events import FieldError, Rejection


def storable(text: str) -> str:
    """``text`` with each lone surrogate written as its escape (``\\udc00``): a payload may be
    rejected for holding one, and neither SQLite's nor BSON's UTF-8 encoder takes it as is."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def raw_text(raw: Any) -> str:
    """The raw payload as text, as received (JSON when it is JSON-able, else its repr), lone
    surrogates escaped (``storable``)."""
    if isinstance(raw, str):
        return storable(raw)
    if isinstance(raw, (bytes, bytearray)):
        return bytes(raw).decode("utf-8", errors="replace")
    try:
        return storable(json.dumps(raw, ensure_ascii=False, default=str))
    except (TypeError, ValueError):
        return storable(repr(raw))


def _as_dict(raw: Any) -> dict:
    if isinstance(raw, (str, bytes, bytearray)):
        try:
            raw = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError):  # not JSON, or nested past the parser
            return {}
    return raw if isinstance(raw, dict) else {}


def _peek(raw: Any, key: str) -> str | None:
    """Best-effort id from a payload that failed validation (for finding the rejection)."""
    value = _as_dict(raw).get(key)
    return storable(value[:128]) if isinstance(value, str) else None


INTERNAL_FIELD = "<internal>"
_REASON_MAX = 160


def internal_error_reason(raw: Any, exc: BaseException) -> str:
    """``internal error: <class>: <message>``: the message's first line, short, with the
    event's content cut out, since it goes to the rejected-events record and to logs."""
    text = (str(exc).splitlines() or [""])[0]
    message = _as_dict(raw).get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        # the whole content, and the head a repr or a truncating message would show
        for piece in sorted({content, content[:40], repr(content)[:40]}, key=len, reverse=True):
            if len(piece) >= 4:
                text = text.replace(piece, "<content>")
    if len(text) > _REASON_MAX:
        text = text[:_REASON_MAX] + "..."
    return f"internal error: {type(exc).__name__}: {text}"


def record_failure(raw: Any, exc: BaseException, ingest: IngestStore, now: datetime) -> IngestResult:
    """Record an event whose ingest failed on an unexpected (programming) error in the
    rejected-events record, with its raw payload, so that an operator sees it and can replay
    it (``memoryctl replay-rejected``) once the cause is fixed. Raises ``TransientError`` when
    the store cannot take the record either."""
    rejection = Rejection(
        event_id=_peek(raw, "event_id"),
        errors=[FieldError(field=INTERNAL_FIELD, reason=internal_error_reason(raw, exc))],
    )
    return record_rejection(raw, rejection, ingest, now)


def record_rejection(raw: Any, rejection: Rejection, ingest: IngestStore, now: datetime) -> IngestResult:
    """Store ``rejection`` with the raw payload and the ids it carries, and report the event
    rejected. Raises ``TransientError`` when the store cannot take the record."""
    errors = [{"field": e.field, "reason": e.reason} for e in rejection.errors]
    ingest.record_rejection(
        RejectedEvent(
            rejection_id=uuid.uuid4().hex,
            event_id=storable(rejection.event_id) if rejection.event_id else None,
            agent_id=_peek(raw, "agent_id"),
            session_id=_peek(raw, "session_id"),
            raw=raw_text(raw),
            errors=errors,
            received_at=now,
        )
    )
    return IngestResult(status="rejected", event_id=storable(rejection.event_id) if rejection.event_id else None,
                        errors=errors)
