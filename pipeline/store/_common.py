"""Rules both store adapters share: how a message moves a session, when a claim rule holds,
what a freshly claimed run looks like, how a stage record moves, and how timestamps are
encoded (vectors: ``pipeline.vectors``).

Pure functions over the documents of ``schemas.documents``; the adapters only decide how to
make them atomic (a SQLite write transaction, or conditional Mongo updates).
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timedelta, timezone

from pydantic import TypeAdapter

from pipeline import trigger
from pipeline.trigger import ClaimRule
from schemas.documents import (  # noqa: F401  (the statuses: read here by the adapters)
    ACTIVE_RUN_STATUSES, FINAL_RUN_STATUSES, Fact, FactHistoryEntry, FormationRun, SessionState, StageRecord,
    StoredMessage,
)


# Extra collections beside pipeline.names.COLLECTIONS: named leases, and the persisted
# context cache (one document per (session, user), so no user id ever becomes a field name).
LEASES = "leases"
CONTEXTS = "contexts"
# model calls made outside any run (session-end consolidations), for ``memoryctl cost``
USAGE = "usage"


def utc(value: datetime) -> datetime:
    """Every stored time is timezone-aware UTC (naive input is read as UTC)."""
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def ts(value: datetime | None) -> str | None:
    """Fixed-width ISO text, so that text order is time order (SQLite columns)."""
    if value is None:
        return None
    return utc(value).isoformat(timespec="microseconds")


def valid_until(fact: Fact, now: datetime, valid_to: datetime | None) -> datetime:
    """When a superseded version stops being valid: ``valid_to`` (the superseding fact's
    ``valid_from``, default ``now``), never before the version became valid."""
    end = utc(valid_to or now)
    return max(end, utc(fact.valid_from)) if fact.valid_from is not None else end


def closed_version(
    fact: Fact, now: datetime, valid_from: datetime | None, run_id: str,
) -> tuple[FactHistoryEntry, datetime]:
    """An UPDATE: the history entry that closes the current version's validity, and the
    ``valid_from`` of the version that replaces it (``valid_from``, default ``now``)."""
    opened = utc(valid_from or now)
    entry = FactHistoryEntry(
        content=fact.content, version=fact.version, changed_at=utc(now), run_id=run_id,
        valid_from=fact.valid_from, valid_to=valid_until(fact, now, opened),
    )
    return entry, max(opened, entry.valid_to)


def lease_until(now: datetime, lease_s: float) -> datetime:
    return utc(now) + timedelta(seconds=lease_s)


@contextmanager
def no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many small acyclic objects: 100k
    candidates otherwise trigger dozens of full-heap passes for nothing to collect."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def humans_of(message: StoredMessage) -> list[str]:
    """The humans a message tells about: the session's users, and the sender of a user turn."""
    humans = list(message.session_users)
    if message.role == "user" and message.sender_id and message.sender_id not in humans:
        humans.append(message.sender_id)
    return humans


def merge_users(users: Iterable[str], more: Iterable[str]) -> list[str]:
    """``users`` then each of ``more`` not among them yet: a set union that keeps first-seen order."""
    return list(dict.fromkeys([*users, *more]))


def apply_message(session: SessionState, message: StoredMessage, now: datetime) -> SessionState:
    """The session state after accepting ``message`` (it gets seq ``last_seq + 1``)."""
    users = merge_users(session.users, humans_of(message))
    last = session.last_activity_at
    now = utc(now)
    update = {
        "last_seq": session.last_seq + 1,
        "messages_since": session.messages_since + 1,
        "tokens_since": session.tokens_since + float(message.weighted_tokens),
        "users": users,
        "max_tier": max(session.max_tier, message.user_tier),
        "preview": session.preview or message.preview,
        "last_activity_at": now if last is None or utc(last) < now else last,
    }
    if reopens(session, message):
        update.update(ended_at=None, ended_history=end_times(session))
    return session.model_copy(update=update)


def reopens(session: SessionState, message: StoredMessage) -> bool:
    """Whether ``message`` resumes an ended session: it was written after the end. A message
    written before the end and delivered after it belongs to the ended session (the end's rule
    forms it at once)."""
    return session.ended_at is not None and utc(message.created_at) > utc(session.ended_at)


def end_times(session: SessionState) -> list[datetime]:
    """Every end of the session, oldest first (a record from before the history was kept has
    only its ``ended_at``)."""
    history = [utc(t) for t in session.ended_history]
    if session.ended_at is not None and utc(session.ended_at) not in history:
        history.append(utc(session.ended_at))
    return history


def ended(session: SessionState, now: datetime) -> SessionState:
    """The session after a ``session.ended`` at ``now``; an ended session keeps its end time."""
    if session.ended_at is not None:
        return session
    return session.model_copy(update={
        "ended_at": utc(now), "ended_history": [*end_times(session), utc(now)],
    })


def new_session(message: StoredMessage) -> SessionState:
    return SessionState(session_id=message.session_id, agent_id=message.agent_id)


def rule_holds(session: SessionState, rule: ClaimRule) -> bool:
    """The claim rule of ``ClaimRule`` over the counters after ``claimed_through``."""
    if session.last_seq <= session.claimed_through:
        return False  # nothing unclaimed: an empty range is never claimed
    if rule.idle_before is not None:
        rule = replace(rule, idle_before=utc(rule.idle_before))
    last_activity = utc(session.last_activity_at) if session.last_activity_at else None
    return trigger.rule_holds(rule, session, last_activity)


def claimed_run(session: SessionState, run: FormationRun, now: datetime, lease_s: float) -> FormationRun:
    """``run`` as stored by a successful claim of the session's unclaimed range."""
    # The tier picks the reflection model: pro for a premium user or a preview session (§5.4).
    tier = max(session.max_tier, 1 if session.preview else 0)
    return run.model_copy(
        update={
            "agent_id": session.agent_id,
            "session_id": session.session_id,
            "seq_from": session.claimed_through + 1,
            "seq_to": session.last_seq,
            "status": "claimed",
            "lease_expires_at": lease_until(now, lease_s),
            "user_ids": list(session.users),
            "group_chat": len(session.users) > 1,
            "tier": tier,
        }
    )


def after_claim(session: SessionState, run: FormationRun) -> SessionState:
    return session.model_copy(
        update={
            "claimed_through": session.last_seq,
            "messages_since": 0,
            "tokens_since": 0.0,
            "active_run_id": run.run_id,
            "lease_expires_at": run.lease_expires_at,
        }
    )


# Stage records (design §5): each transition once. SQLite applies the record functions inside
# its write transaction; Mongo writes the same fields with a conditional update (attempts by
# ``$inc`` on start and ``$max`` on completion).
def started_fields(now: datetime) -> dict:
    """What starting a stage sets, besides ``attempts`` + 1."""
    return {"status": "running", "started_at": utc(now), "error": None}


def started(record: StageRecord | None, now: datetime) -> StageRecord | None:
    """The stage's record once started now; None when it is done (a done stage never restarts)."""
    record = record or StageRecord()
    if record.status == "done":
        return None
    return record.model_copy(update={**started_fields(now), "attempts": record.attempts + 1})


def running_status(status: str) -> str:
    """A run's status once one of its stages started: a claimed run is running."""
    return "running" if status == "claimed" else status


def completed_fields(record: StageRecord) -> dict:
    """What completing a stage writes over its stored record: every field of ``record`` but
    ``attempts`` (the larger of both counts stays) and an unset ``started_at`` (the stored
    start stays), with status ``done``."""
    values = record.model_dump(exclude={"attempts"})
    values["status"] = "done"
    if values["started_at"] is None:
        del values["started_at"]
    return values


def completed(current: StageRecord | None, record: StageRecord) -> StageRecord | None:
    """The stored record ``current`` completed with ``record``; None when it is done already."""
    if current is not None and current.status == "done":
        return None
    base = current or StageRecord()
    return StageRecord.model_validate({
        **base.model_dump(), **completed_fields(record), "attempts": max(record.attempts, base.attempts),
    })


def failed_fields(error: str, now: datetime) -> dict:
    """What failing a stage sets (a done stage is never failed)."""
    return {"status": "failed", "error": error, "finished_at": utc(now)}


_RUN_FIELD_TYPES: dict[str, TypeAdapter] = {}


def run_field(name: str, value: object) -> tuple[TypeAdapter, object]:
    """A top-level run field's value checked as ``FormationRun`` checks it (``ValueError`` for
    a field it does not have), with the field's adapter to write it: an adapter sets a field
    without reading, checking and rewriting the whole run and its stage outputs."""
    adapter = _RUN_FIELD_TYPES.get(name)
    if adapter is None:
        if name not in FormationRun.model_fields:
            raise ValueError(f"update_run_fields: unknown run field {name!r}")
        adapter = _RUN_FIELD_TYPES[name] = TypeAdapter(FormationRun.model_fields[name].annotation)
    return adapter, adapter.validate_python(value)
