"""Ingest tasks: validate and store producer events, then hand a claimed run to formation.

Thin by design: the decisions live in ``pipeline.ingest``. A rejected event is recorded there
and never retried; an unavailable store or broker is retried with backoff by ``MemoryTask``.
"""

from __future__ import annotations

import logging
from typing import Any

from pipeline import names
from pipeline.errors import TransientError
from pipeline.ingest import IngestResult, ingest_raw_event, ingest_raw_events
from schemas.settings import get_settings
from workers.app import app
from workers.base import MemoryTask
from workers.deps import get_deps

log = logging.getLogger("memory.ingest")


# A session.ended that arrives before any message of its session is delivered again after
# 5, 10, 20, 40 and 80 s, then accepted as is.
MAX_END_DEFERRALS = 5
END_DEFERRAL_BASE_S = 5.0


def _send(name: str, kwargs: dict[str, Any], countdown: float | None = None) -> None:
    settings = get_settings()
    try:
        app.send_task(
            name,
            kwargs=kwargs,
            countdown=countdown,
            ignore_result=True,
            retry=True,
            retry_policy={"max_retries": settings.publish_retry_max, "interval_start": 0.2, "interval_step": 0.5, "interval_max": 2.0},
        )
    except Exception as exc:  # kombu raises its own OperationalError family for a lost broker
        raise TransientError(f"could not enqueue {name} ({kwargs}): {exc}") from exc


def hand_on(result: IngestResult, raw: Any, deferrals: int = 0) -> None:
    """Start formation for a claimed run; after a session end with nothing left to form, ask
    for the consolidation of the session's leftover reflection buffers; deliver a session end
    that came before its session's messages again later."""
    if result.session_unknown:
        if deferrals < MAX_END_DEFERRALS:
            _send(
                names.TASK_INGEST_EVENT, {"event": raw, "deferrals": deferrals + 1},
                countdown=END_DEFERRAL_BASE_S * 2 ** deferrals,
            )
        else:
            log.warning("session.ended %s: session %s never had a message", result.event_id, result.session_id)
    elif result.run is not None:
        # If this send fails the run stays claimed; the stale-run sweep restarts it when its
        # lease expires, so a lost hand-on delays formation but loses nothing.
        _send(names.TASK_EXTRACT_FACTS, {"run_id": result.run.run_id})
    elif result.ended_without_run and result.session_id:
        deps = get_deps()
        session = deps.store.get_session(result.session_id)
        # a live run of this session consolidates at its own end (it sees ended_at); asking
        # now would consolidate before that run's reflections exist
        live = (
            session is not None and session.active_run_id is not None
            and session.lease_expires_at is not None and session.lease_expires_at > deps.clock.now()
        )
        if session is not None and not live:
            _send(
                names.TASK_CONSOLIDATE_SESSION,
                {"agent_id": session.agent_id, "session_id": session.session_id},
            )


def _summary(results: list[IngestResult]) -> dict[str, int]:
    counts = {"accepted": 0, "duplicate": 0, "rejected": 0, "runs": 0}
    for r in results:
        counts[r.status] += 1
        counts["runs"] += r.run is not None
    return counts


@app.task(base=MemoryTask, name=names.TASK_INGEST_EVENT, bind=True)
def ingest_event(self, event: Any, deferrals: int = 0) -> dict[str, int]:
    """One raw event (a JSON object or its text)."""
    deps = get_deps()
    try:
        result = ingest_raw_event(event, deps.store, deps.settings, deps.clock)
        hand_on(result, event, deferrals)
    except TransientError as exc:
        self.retry_transient(exc)
    if result.status == "rejected":
        log.warning("rejected event %s: %s", result.event_id, result.errors)
    return _summary([result])


@app.task(base=MemoryTask, name=names.TASK_INGEST_BATCH, bind=True)
def ingest_batch(self, events: list[Any]) -> dict[str, int]:
    """A batch published in one queue message; each event is ingested on its own."""
    deps = get_deps()
    batch = ingest_raw_events(events, deps.store, deps.settings, deps.clock)
    try:
        for raw, result in zip(events, batch.results):
            hand_on(result, raw)
    except TransientError as exc:
        # every event is already stored: a retry re-reads them as duplicates and claims again
        # only where a rule still holds, so nothing is formed twice
        self.retry_transient(exc)
    for result in batch.results:
        if result.status == "rejected":
            log.warning("rejected event %s: %s", result.event_id, result.errors)
    if batch.error is not None:
        _retry_rest(self, events[batch.next_index:], batch.error)
    return _summary(batch.results)


def _retry_rest(task: MemoryTask, rest: list[Any], exc: TransientError) -> None:
    """Retry only the events the batch did not reach."""
    settings = get_settings()
    if task.request.retries >= settings.task_max_retries:
        raise exc
    raise task.retry(
        kwargs={"events": rest}, exc=exc, countdown=task.retry_delay(exc),
        max_retries=settings.task_max_retries,
    )


@app.task(base=MemoryTask, name=names.TASK_NOOP, bind=True)
def noop(self) -> None:
    """Does nothing: the baseline of the ingest benchmark."""
    return None
