"""Ingest one producer event (design §3, §4): validate, store once, update the trigger, claim.

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
- A batch (``ingest_raw_events``) stores its consecutive messages in one store call and then
  checks each session it touched once, so its run may reach past the threshold message to the
  batch's last one: a transaction per message was most of the cost of ingest.
- A message that arrives after its session ended (out of order) is claimed by the session-end
  rule, so late messages are formed too.
- ``session.ended`` marks the session ended and claims whatever is unformed (at least one
  message) with reason ``session_end``; the formation chain then consolidates the session's
  scopes. When nothing is unformed, consolidating the leftovers of such a session is the
  business of another task, not of ingest: the result says so (``ConsolidateSession``) unless
  a live run of the session will do it at its own end. When the session is not known yet (its
  messages are still on the way), ``session_unknown`` is set and the result says to deliver
  the event again later (``DeliverAgain``), with growing delays, a bounded number of times.

Every result carries what happens next (``IngestResult.then``): the worker dispatches it and
decides nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Literal

from pipeline import tracing, trigger
from pipeline.clock import Clock
from pipeline.errors import InvalidInput, TransientError
from pipeline.ingest_results import (
    BatchResult, ConsolidateSession, Done, IngestResult, Next, StartRun, early_end,
)
from pipeline.rejections import record_failure, record_rejection
from pipeline.store.port import IngestOutcome, IngestStore, RunStore, SessionStore
from pipeline.trigger import ClaimRule
from schemas.documents import FormationRun, SessionState, StoredMessage
from schemas.events import FieldError, MessageAdded, Rejection, SessionEnded, parse_event
from schemas.settings import Settings

Reason = Literal["threshold", "session_end"]


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
        metadata=dict(event.metadata),
    )


def _claim(
    store: SessionStore, settings: Settings, *, agent_id: str, session_id: str, rule: ClaimRule,
    reason: Reason, now: datetime,
) -> FormationRun | None:
    return claim_run(store.runs, trigger.new_run(session_id, agent_id, reason, now), rule, now, settings.claim_lease_s)


def claim_run(
    runs: RunStore, run: FormationRun, rule: ClaimRule, now: datetime, lease_s: float, *, follow_up: bool = False,
) -> FormationRun | None:
    """``runs.try_claim`` within a ``claim_run`` span whose context the run keeps
    (``trace_context``): every stage of the run becomes a span under it, in the trace of
    whatever claimed it (the ingest of the message that made the session due, the sweep).
    ``follow_up``: a run claimed as another one finishes starts a trace of its own, linked to
    the finishing run's, so that each run stays one trace."""
    with tracing.span("claim_run", {"memory.run_id": run.run_id, "memory.session_id": run.session_id,
                                    "memory.agent_id": run.agent_id, "memory.reason": run.reason},
                      new_trace=follow_up) as span:
        run.trace_context = tracing.carrier()
        claimed = runs.try_claim(run.session_id, rule, run, now, lease_s)
        span.set_attribute("memory.claimed", claimed is not None)
        return claimed


def _claim_if_due(
    event: MessageAdded, session: SessionState, store: SessionStore, settings: Settings, now: datetime
) -> FormationRun | None:
    """Claim ``event``'s session when its rule holds on ``session``, the state the store
    returned after ingesting: the session-end rule once the session ended, else the threshold."""
    if session.ended_at is not None:
        rule, reason = trigger.session_end_rule(), "session_end"
    else:
        rule, reason = trigger.threshold_rule(settings), "threshold"
    # a session whose claim is held cannot be claimed: skip the write the store would refuse
    if session.active_run_id is None and trigger.rule_holds(rule, session):
        return _claim(
            store, settings, agent_id=event.agent_id, session_id=event.session_id, rule=rule,
            reason=reason, now=now,
        )
    return None


def _message_result(event: MessageAdded, outcome: IngestOutcome, run: FormationRun | None) -> IngestResult:
    return IngestResult(
        status=outcome.status, event_id=event.event_id, kind=event.type,
        session_id=event.session_id, seq=outcome.seq, run=run, then=Done() if run is None else StartRun(run.run_id),
    )


def _reject_session(raw: Any, event: MessageAdded | SessionEnded, reason: str, ingest: IngestStore, now: datetime) -> IngestResult:
    """Record an event the store refused on ``session_id`` (the session belongs to another
    agent) like an invalid one."""
    rejection = Rejection(event_id=event.event_id, errors=[FieldError(field="session_id", reason=reason)])
    payload = event.model_dump(mode="json") if raw is None else raw
    result = record_rejection(payload, rejection, ingest, now)
    return replace(result, kind=event.type, session_id=event.session_id)


def ingest_message(
    event: MessageAdded, store: SessionStore, settings: Settings, now: datetime, raw: Any = None
) -> IngestResult:
    outcome = store.ingest.ingest_message(to_stored_message(event, now), now)
    if outcome.status == "rejected":
        return _reject_session(raw, event, outcome.reason or "", store.ingest, now)
    return _message_result(event, outcome, _claim_if_due(event, outcome.session, store, settings, now))


def ingest_messages(
    events: Sequence[MessageAdded], store: SessionStore, settings: Settings, now: datetime,
    raws: Sequence[Any] | None = None,
) -> tuple[list[IngestResult], TransientError | None]:
    """Store consecutive messages with one ``Store.ingest_messages``, then claim each session
    they touched once, on its state after its last message of the batch (the run is reported
    on that message's result). The counters only grow within a batch, so a rule that held on
    any message of it holds on the last one too; the run then covers the batch's messages after
    the threshold as well. A message the store refused is recorded as rejected (``raws`` holds
    the payloads as received). Returns the results and, when the store failed transiently, the
    error: the results then cover only the events that need no retry."""
    try:
        outcomes = store.ingest.ingest_messages([to_stored_message(e, now) for e in events], now)
    except TransientError as exc:
        return [], exc
    last = {e.session_id: i for i, (e, o) in enumerate(zip(events, outcomes)) if o.status != "rejected"}
    claim_at = set(last.values())
    results: list[IngestResult] = []
    for i, (event, outcome) in enumerate(zip(events, outcomes)):
        try:
            if outcome.status == "rejected":
                raw = None if raws is None else raws[i]
                results.append(_reject_session(raw, event, outcome.reason or "", store.ingest, now))
                continue
            run = _claim_if_due(event, outcome.session, store, settings, now) if i in claim_at else None
        except TransientError as exc:
            # events from i on are retried: stored, they come back as duplicates and claim then
            return results, exc
        results.append(_message_result(event, outcome, run))
    return results, None


def end_session(
    event: SessionEnded, store: SessionStore, settings: Settings, now: datetime, raw: Any = None,
    deferrals: int = 0,
) -> IngestResult:
    """Mark the session ended and claim whatever is unformed. Repeating it changes nothing
    once that range is claimed. A session of another agent is left alone and the event is
    recorded as rejected. A session whose humans were declared but which has no message yet
    is left open and reported unknown, like a session never seen: the end is delivered again
    after its messages (which it must form at once, not one run per late message);
    ``deferrals``: how many times it was delivered again already."""
    known = store.ingest.get_session(event.session_id)
    if known is not None and known.last_seq == 0 and known.agent_id == event.agent_id:
        return IngestResult(status="accepted", event_id=event.event_id, kind=event.type, session_id=event.session_id,
                            session_unknown=True, then=early_end(event.event_id, event.session_id, deferrals))
    try:
        session = store.ingest.mark_session_ended(event.session_id, event.ended_at or now, agent_id=event.agent_id)
    except InvalidInput as refused:
        return _reject_session(raw, event, refused.reason, store.ingest, now)
    run = None
    if session is not None and trigger.should_form_at_session_end(session):
        run = _claim(
            store, settings, agent_id=event.agent_id, session_id=event.session_id,
            rule=trigger.session_end_rule(), reason="session_end", now=now,
        )
    # an end of a session already ended that claims nothing changes nothing: a duplicate (a
    # replayed file, a redelivery), as a message already stored is
    repeated = known is not None and known.ended_at is not None and run is None
    return IngestResult(
        status="duplicate" if repeated else "accepted", event_id=event.event_id, kind=event.type,
        session_id=event.session_id, run=run, session_unknown=session is None,
        then=_after_end(event, session, run, now, deferrals),
    )


def _after_end(
    event: SessionEnded, session: SessionState | None, run: FormationRun | None, now: datetime, deferrals: int,
) -> Next:
    """What follows a session end: its run's formation; else (a repeated end too: the delivery
    that ended it may have stopped before asking) the consolidation of its leftover buffers,
    unless a live run holds the session: that run consolidates at its own end (it sees
    ``ended_at``), and consolidating now would come before its reflections exist."""
    if session is None:
        return early_end(event.event_id, event.session_id, deferrals)
    if run is not None:
        return StartRun(run.run_id)
    live = session.active_run_id is not None and session.lease_expires_at is not None and session.lease_expires_at > now
    return Done() if live else ConsolidateSession(session.agent_id, session.session_id)


def ingest_raw_event(
    raw: Any, store: SessionStore, settings: Settings, clock: Clock, deferrals: int = 0,
) -> IngestResult:
    """Validate and ingest one raw event (dict, JSON text or bytes); ``deferrals``: how many
    times an early session end was delivered again already (``IngestResult.then``).

    Raises ``TransientError`` only when the store is unavailable; bad input never raises.
    """
    with tracing.span("ingest", {"memory.events": 1}) as span:
        event = parse_event(raw, max_message_bytes=settings.max_message_bytes)
        result = _ingest_parsed(raw, event, store, settings, clock.now(), deferrals)
        span.set_attributes(_span_counts([result]))
        return result


def _span_counts(results: Sequence[IngestResult]) -> dict[str, int]:
    """What an ingest span says: counts and the runs claimed, ids only."""
    counts = {f"memory.{status}": 0 for status in ("accepted", "duplicate", "rejected")}
    for r in results:
        counts[f"memory.{r.status}"] += 1
    counts["memory.runs_claimed"] = sum(1 for r in results if r.run is not None)
    return counts


def _ingest_parsed(
    raw: Any, event: MessageAdded | SessionEnded | Rejection, store: SessionStore, settings: Settings, now: datetime,
    deferrals: int = 0,
) -> IngestResult:
    if isinstance(event, Rejection):
        return record_rejection(raw, event, store.ingest, now)
    if isinstance(event, MessageAdded):
        return ingest_message(event, store, settings, now, raw)
    return end_session(event, store, settings, now, raw, deferrals)


def ingest_raw_events(raws: Sequence[Any], store: SessionStore, settings: Settings, clock: Clock) -> BatchResult:
    """Ingest a batch: a bad event is rejected and the rest go on.

    Each run of consecutive valid messages is stored in one store call (``ingest_messages``)
    and then claims once per session; rejections and session ends are handled one at a time in
    their place, so a session end sees every message before it and none after it.

    A transient store error stops the batch (``BatchResult.error``); ingest is idempotent, so
    the caller retries from ``next_index``. An unexpected error in a run of messages has that
    run taken again one event at a time (what it had stored comes back as duplicates), so
    only the events it hits fail: each is recorded by ``record_failure`` and listed in
    ``BatchResult.failures``, and the batch goes on. The caller then fails visibly.
    """
    with tracing.span("ingest", {"memory.events": len(raws)}) as span:
        batch = _ingest_batch(raws, store, settings, clock)
        span.set_attributes(_span_counts(batch.results))
        span.set_attribute("memory.failures", len(batch.failures))
        return batch


def _ingest_batch(raws: Sequence[Any], store: SessionStore, settings: Settings, clock: Clock) -> BatchResult:
    parsed = [parse_event(raw, max_message_bytes=settings.max_message_bytes) for raw in raws]
    batch = BatchResult(results=[])
    index = 0
    while index < len(raws):
        end = index
        while end < len(raws) and isinstance(parsed[end], MessageAdded):
            end += 1
        if end > index:
            try:
                done, error = ingest_messages(parsed[index:end], store, settings, clock.now(), raws[index:end])
            except TransientError:
                raise  # ingest_messages returns these; one raised here is not ours to hide
            except Exception:  # a programming error: found again, event by event, just below
                pass
            else:
                batch.results.extend(done)
                if error is not None:
                    batch.error, batch.next_index = error, index + len(done)
                    return batch
                index = end
                continue
        else:
            end = index + 1
        for i in range(index, end):
            now = clock.now()
            try:
                try:
                    batch.results.append(_ingest_parsed(raws[i], parsed[i], store, settings, now))
                except TransientError:
                    raise
                except Exception as exc:
                    batch.results.append(record_failure(raws[i], exc, store.ingest, now))
                    batch.failures.append((i, exc))
            except TransientError as exc:
                batch.error, batch.next_index = exc, i
                return batch
        index = end
    batch.next_index = len(raws)
    return batch
