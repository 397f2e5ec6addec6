"""Ingest one producer event (SPEC §3, §4): validate, store once, update the trigger, claim.

No Celery here: ``workers/ingest.py`` calls these functions and hands a claimed run on to the
formation chain.

- An invalid event is recorded in the rejected-events collection with its raw payload and
  ``[{field, reason}]``; it is never retried.
- ``message.added`` is stored idempotently (``event_id`` and (``session_id``, ``message_id``));
  the store assigns the per-session ingest sequence number and moves the trigger counters in
  the same atomic operation. When the threshold rule holds on the counters it returned, a
  claim is attempted; the store re-checks the rule atomically, so racing workers take one run
  per range. A duplicate still attempts the claim when the rule holds, so a redelivery after
  a crash between "stored" and "claimed" does not leave a due session unclaimed.
- A message that arrives after its session ended (out of order) is claimed by the session-end
  rule, so late messages are formed too.
- ``session.ended`` marks the session ended and claims whatever is unformed (at least one
  message) with reason ``session_end``; the formation chain then consolidates the session's
  scopes. When nothing is unformed, ``IngestResult.ended_without_run`` is set: consolidating
  leftovers of such a session is the business of another task, not of ingest. When the
  session is not known yet (its messages are still on the way), ``session_unknown`` is set
  and the caller delivers the event again later.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pipeline import trigger
from pipeline.clock import Clock
from pipeline.errors import TransientError
from pipeline.store.port import ClaimRule, Store
from schemas.documents import FormationRun, RejectedEvent, StoredMessage
from schemas.events import MessageAdded, Rejection, SessionEnded, parse_event
from schemas.settings import Settings

Status = Literal["accepted", "duplicate", "rejected"]
Reason = Literal["threshold", "session_end"]


@dataclass(frozen=True)
class IngestResult:
    status: Status
    event_id: str | None = None
    kind: str | None = None  # "message.added" | "session.ended" | None when rejected
    session_id: str | None = None
    seq: int | None = None
    run: FormationRun | None = None  # the run this event claimed, if any
    errors: list[dict[str, str]] = field(default_factory=list)  # [{field, reason}] when rejected
    # session.ended for a session the store does not know: its messages may still be on the
    # way (out of order), so the caller may deliver the event again later
    session_unknown: bool = False

    @property
    def ended_without_run(self) -> bool:
        """A session ended with nothing unformed: only leftovers may need consolidating."""
        return self.kind == "session.ended" and self.run is None and not self.session_unknown


@dataclass
class BatchResult:
    """Results of a batch, in order. Processing stops at the first transient error (the store
    or broker is unavailable): ``error`` holds it and ``events[next_index:]`` are still to do."""

    results: list[IngestResult]
    error: TransientError | None = None
    next_index: int = 0

    @property
    def runs(self) -> list[FormationRun]:
        return [r.run for r in self.results if r.run is not None]

    def counts(self) -> dict[str, int]:
        out = {"accepted": 0, "duplicate": 0, "rejected": 0}
        for r in self.results:
            out[r.status] += 1
        return out


def raw_text(raw: Any) -> str:
    """The raw payload as text, as received (JSON when it is JSON-able, else its repr)."""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, (bytes, bytearray)):
        return bytes(raw).decode("utf-8", errors="replace")
    try:
        return json.dumps(raw, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(raw)


def _peek(raw: Any, key: str) -> str | None:
    """Best-effort id from a payload that failed validation (for finding the rejection)."""
    if isinstance(raw, (str, bytes, bytearray)):
        try:
            raw = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            return None
    value = raw.get(key) if isinstance(raw, dict) else None
    return value[:128] if isinstance(value, str) else None


def record_rejection(raw: Any, rejection: Rejection, store: Store, now: datetime) -> IngestResult:
    errors = [{"field": e.field, "reason": e.reason} for e in rejection.errors]
    store.record_rejection(
        RejectedEvent(
            rejection_id=uuid.uuid4().hex,
            event_id=rejection.event_id,
            agent_id=_peek(raw, "agent_id"),
            session_id=_peek(raw, "session_id"),
            raw=raw_text(raw),
            errors=errors,
            received_at=now,
        )
    )
    return IngestResult(status="rejected", event_id=rejection.event_id, errors=errors)


def to_stored_message(event: MessageAdded, now: datetime) -> StoredMessage:
    msg = event.message
    return StoredMessage(
        agent_id=event.agent_id,
        session_id=event.session_id,
        message_id=msg.message_id,
        event_id=event.event_id,
        role=msg.role,
        sender_id=msg.sender_id,
        sender_name=msg.sender_name,
        content=msg.content,
        created_at=msg.created_at,
        ingested_at=now,
        weighted_tokens=trigger.weighted_tokens(msg),
        session_users=event.humans,
        user_tier=event.user_tier,
        preview=event.preview,
        agent_name=event.agent_name,
    )


def _claim(
    store: Store, settings: Settings, *, agent_id: str, session_id: str, rule: ClaimRule,
    reason: Reason, now: datetime,
) -> FormationRun | None:
    # seq_from/seq_to are placeholders: the store fills the range it actually claims.
    run = FormationRun(
        run_id=uuid.uuid4().hex,
        agent_id=agent_id,
        session_id=session_id,
        seq_from=0,
        seq_to=0,
        reason=reason,
        status="claimed",
        created_at=now,
    )
    return store.try_claim(session_id, rule, run, now, settings.claim_lease_s)


def ingest_message(event: MessageAdded, store: Store, settings: Settings, now: datetime) -> IngestResult:
    outcome = store.ingest_message(to_stored_message(event, now), now)
    session = outcome.session
    if session.ended_at is not None:
        rule, reason = trigger.session_end_rule(), "session_end"
    else:
        rule, reason = trigger.threshold_rule(settings), "threshold"
    run = None
    # a session whose claim is held cannot be claimed: skip the write the store would refuse
    if session.active_run_id is None and trigger.rule_holds(rule, session):
        run = _claim(
            store, settings, agent_id=event.agent_id, session_id=event.session_id, rule=rule,
            reason=reason, now=now,
        )
    return IngestResult(
        status=outcome.status, event_id=event.event_id, kind=event.type,
        session_id=event.session_id, seq=outcome.seq, run=run,
    )


def end_session(event: SessionEnded, store: Store, settings: Settings, now: datetime) -> IngestResult:
    """Mark the session ended and claim whatever is unformed. Repeating it changes nothing
    once that range is claimed."""
    session = store.mark_session_ended(event.session_id, event.ended_at or now)
    run = None
    if session is not None and trigger.should_form_at_session_end(session):
        run = _claim(
            store, settings, agent_id=event.agent_id, session_id=event.session_id,
            rule=trigger.session_end_rule(), reason="session_end", now=now,
        )
    return IngestResult(
        status="accepted", event_id=event.event_id, kind=event.type, session_id=event.session_id,
        run=run, session_unknown=session is None,
    )


def ingest_raw_event(raw: Any, store: Store, settings: Settings, clock: Clock) -> IngestResult:
    """Validate and ingest one raw event (dict, JSON text or bytes).

    Raises ``TransientError`` only when the store is unavailable; bad input never raises.
    """
    now = clock.now()
    event = parse_event(raw, max_message_bytes=settings.max_message_bytes)
    if isinstance(event, Rejection):
        return record_rejection(raw, event, store, now)
    if isinstance(event, MessageAdded):
        return ingest_message(event, store, settings, now)
    return end_session(event, store, settings, now)


def ingest_raw_events(raws: Sequence[Any], store: Store, settings: Settings, clock: Clock) -> BatchResult:
    """Ingest a batch, each event on its own: a bad event is rejected and the rest go on.

    A transient store error stops the batch (``BatchResult.error``); ingest is idempotent, so
    the caller retries from ``next_index``.
    """
    results: list[IngestResult] = []
    for index, raw in enumerate(raws):
        try:
            results.append(ingest_raw_event(raw, store, settings, clock))
        except TransientError as exc:
            return BatchResult(results=results, error=exc, next_index=index)
    return BatchResult(results=results, next_index=len(raws))
