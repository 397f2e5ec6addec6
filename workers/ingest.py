"""Ingest tasks: validate and store producer events, then hand a claimed run to formation.

Thin by design: the decisions live in ``pipeline.ingest``. A rejected event is recorded there
and never retried; an unavailable store or broker is retried with backoff by ``MemoryTask``,
and an event whose store stays unavailable past the retries stays queued, tried again at the
backoff ceiling (never acked and lost, never recorded in the store that is down).
An event that fails on an unexpected error is recorded in the rejected-events record too (an
acked task would otherwise lose it), to be replayed with ``memoryctl replay-rejected`` once the
cause is fixed; the task then fails with ``IngestFailed``, logged at ERROR without content.
"""

from __future__ import annotations

import contextlib
import logging
import traceback
from collections.abc import Iterator
from typing import Any

from pipeline import names
from pipeline.errors import TransientError
from pipeline.ingest import IngestResult, ingest_raw_event, ingest_raw_events, record_failure
from pipeline.ingest_results import ConsolidateSession, DeliverAgain, StartRun
from pipeline.sweep import start_runs
from workers.app import app
from workers.base import MemoryTask
from workers.deps import get_deps
from workers.dispatch import send

log = logging.getLogger("memory.ingest")


def hand_on(result: IngestResult, raw: Any) -> None:
    """Dispatch what ingest decided follows the event (``IngestResult.then``)."""
    step = result.then
    if isinstance(step, StartRun):
        # a run the broker did not take is released (failed, with the reason) and the stale-run
        # retry starts it again: a lost hand-on delays formation but loses nothing
        deps = get_deps()
        start_runs(deps.store.runs, [step.run_id], lambda run_id: send(names.TASK_EXTRACT_FACTS, {"run_id": run_id}),
                   deps.clock.now())
    elif isinstance(step, ConsolidateSession):
        send(names.TASK_CONSOLIDATE_SESSION, {"agent_id": step.agent_id, "session_id": step.session_id})
    elif isinstance(step, DeliverAgain):
        send(names.TASK_INGEST_EVENT, {"event": raw, "deferrals": step.deferrals}, countdown=step.countdown_s)
    elif step.warning:
        log.warning("%s", step.warning)


class IngestFailed(RuntimeError):
    """Events failed on an unexpected error and were recorded for replay. Raised in place of
    the original error, whose message may quote an event's content."""


def _log_failures(failures: list[tuple[IngestResult, Exception]]) -> IngestFailed:
    """Log each failure at ERROR (the reason as recorded and where it was raised, not the
    error's own message) and return the error the task fails with."""
    for result, exc in failures:
        reason = result.errors[0]["reason"] if result.errors else type(exc).__name__
        where = "".join(traceback.format_tb(exc.__traceback__))
        log.error("ingest of event %s failed; recorded for replay (memoryctl rejected): %s\n%s",
                  result.event_id, reason, where.rstrip())
    return IngestFailed(
        f"{len(failures)} event(s) failed on an unexpected error and were recorded for replay "
        "(memoryctl rejected, memoryctl replay-rejected)"
    )


@contextlib.contextmanager
def _recorded(raws: list[Any], deps) -> Iterator[None]:
    """An unexpected error raised inside is recorded for replay for each of ``raws``, and the
    task fails with ``IngestFailed`` instead; a transient one passes on, to be retried."""
    try:
        yield
    except TransientError:
        raise
    except Exception as exc:
        now = deps.clock.now()
        failed = _log_failures([(record_failure(raw, exc, deps.store.ingest, now), exc) for raw in raws])
        raise failed from None  # the original's message may quote the events' content


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
    with self.retrying(keep_message=True):
        with _recorded([event], deps):
            result = ingest_raw_event(event, deps.store, deps.settings, deps.clock, deferrals)
        hand_on(result, event)
    if result.status == "rejected":
        log.warning("rejected event %s: %s", result.event_id, result.errors)
    return _summary([result])


@app.task(base=MemoryTask, name=names.TASK_INGEST_BATCH, bind=True)
def ingest_batch(self, events: list[Any]) -> dict[str, int]:
    """A batch published in one queue message; each event is ingested on its own."""
    deps = get_deps()
    # an unexpected error here is outside any one event (parsing the batch): all are affected
    with self.retrying(keep_message=True), _recorded(events, deps):
        batch = ingest_raw_events(events, deps.store, deps.settings, deps.clock)
    # every event is already stored: a retry re-reads them as duplicates and claims again
    # only where a rule still holds, so nothing is formed twice
    with self.retrying(keep_message=True):
        for raw, result in zip(events, batch.results):
            hand_on(result, raw)
    failed = {i for i, _ in batch.failures}
    for i, result in enumerate(batch.results):
        if result.status == "rejected" and i not in failed:
            log.warning("rejected event %s: %s", result.event_id, result.errors)
    error = _log_failures([(batch.results[i], exc) for i, exc in batch.failures]) if batch.failures else None
    if batch.error is not None:
        # retried with the events the batch did not reach only (all of them when the store
        # stays unavailable: those already stored are then counted as duplicates)
        with self.retrying(keep_message=True, kwargs={"events": events[batch.next_index:]}):
            raise batch.error
    if error is not None:
        raise error from None
    return _summary(batch.results)


@app.task(base=MemoryTask, name=names.TASK_NOOP, bind=True)
def noop(self) -> None:
    """Does nothing: the baseline of the ingest benchmark."""
    return None
