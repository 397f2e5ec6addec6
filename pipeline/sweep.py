"""Beat's two jobs (design §4, §9): the cold-session sweep and the retry of stale runs.

Both return the ids of the runs to start; the maintenance task sends the first stage for each.
Both are safe to run twice at once: every claim and every reopen is atomic in the store, so two
sweeps racing on one session claim its range once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from pipeline import tracing
from pipeline.errors import TransientError
from pipeline.ingest import claim_run
from pipeline.store.port import RunStore, SessionStore
from pipeline.trigger import cold_rule, new_run
from schemas.settings import Settings

log = logging.getLogger("memory.sweep")

# A bound on batches per sweep, so one sweep always ends even if candidates keep coming back.
MAX_BATCHES = 100


@dataclass
class SweepResult:
    run_ids: list[str] = field(default_factory=list)
    candidates: int = 0
    lost: int = 0  # candidates another claimer got first (or no longer cold)


def sweep_cold_sessions(store: SessionStore, settings: Settings, now: datetime) -> SweepResult:
    """Claim every session idle for ``cold_after_s`` with ``min_messages_to_form`` unformed
    messages, in batches of ``sweep_batch_size``, with the cold rule re-checked atomically."""
    with tracing.span("sweep_cold_sessions") as span:
        result = _sweep_cold_sessions(store, settings, now)
        span.set_attributes({"memory.candidates": result.candidates, "memory.claimed": len(result.run_ids),
                             "memory.lost": result.lost})
        return result


def _sweep_cold_sessions(store: SessionStore, settings: Settings, now: datetime) -> SweepResult:
    rule = cold_rule(settings, now)
    result = SweepResult()
    seen: set[str] = set()
    for _ in range(MAX_BATCHES):
        batch = store.ingest.find_cold_sessions(rule.idle_before, settings.min_messages_to_form, settings.sweep_batch_size)
        fresh = [sid for sid in batch if sid not in seen]
        if not fresh:
            break
        for session_id in fresh:
            seen.add(session_id)
            result.candidates += 1
            session = store.ingest.get_session(session_id)
            if session is None:
                result.lost += 1
                continue
            run = claim_run(store.runs, new_run(session_id, session.agent_id, "cold", now), rule, now,
                            settings.claim_lease_s)
            if run is None:
                result.lost += 1
            else:
                result.run_ids.append(run.run_id)
        if len(batch) < settings.sweep_batch_size:
            break
    if result.candidates:
        log.info("cold sweep: %d candidates, %d claimed", result.candidates, len(result.run_ids))
    return result


@dataclass
class RetryResult:
    run_ids: list[str] = field(default_factory=list)   # reopened, to be started again
    dead: list[str] = field(default_factory=list)      # attempts exhausted
    held: list[str] = field(default_factory=list)      # session held by another live run: later


def exhausted_reason(attempts: int, error: str | None) -> str:
    return f"exhausted {attempts} attempts: {error or 'lease expired'}"


def retry_stale_runs(runs: RunStore, settings: Settings, now: datetime) -> RetryResult:
    """Reopen runs whose lease expired and failed runs, within ``max_run_attempts``; a run that
    has used them all is marked ``dead`` with its last error (only an operator replays it).
    A reopened run keeps its trace: its first stage joins the trace stored on it."""
    with tracing.span("retry_stale_runs") as span:
        result = _retry_stale_runs(runs, settings, now)
        span.set_attributes({"memory.reopened": len(result.run_ids), "memory.dead": len(result.dead),
                             "memory.held": len(result.held)})
        return result


def _retry_stale_runs(runs: RunStore, settings: Settings, now: datetime) -> RetryResult:
    result = RetryResult()
    for run in runs.find_stale_runs(now, settings.sweep_batch_size):
        if run.attempts >= settings.max_run_attempts:
            runs.fail_run(run.run_id, exhausted_reason(run.attempts, run.error), now, dead=True)
            result.dead.append(run.run_id)
            continue
        reopened = runs.reopen_run(run.run_id, now, settings.claim_lease_s)
        if reopened is None:
            result.held.append(run.run_id)
        else:
            result.run_ids.append(reopened.run_id)
    if result.run_ids or result.dead:
        log.info("stale runs: %d reopened, %d dead", len(result.run_ids), len(result.dead))
    return result


def start_runs(runs: RunStore, run_ids: Sequence[str], start: Callable[[str], None], now: datetime) -> None:
    """Start each claimed run with ``start(run_id)`` (its first stage's send).

    A run whose start fails (the broker did not take it) would stay ``claimed``, its session
    held, until its lease expires. Instead that run and every one after it is marked ``failed``
    with the reason, which releases its session's claim; beat's stale-run retry starts it
    again. The error is raised again, naming those runs."""
    for i, run_id in enumerate(run_ids):
        try:
            start(run_id)
        except Exception as exc:
            left = list(run_ids[i:])
            reason = f"not started: {type(exc).__name__}: {exc}"
            try:
                for other in left:
                    runs.fail_run(other, reason, now, dead=False)
            except Exception as store_exc:  # noqa: BLE001 - said below; the send's error is raised
                log.error("%d run(s) claimed but not started (%s) and not released either (%s: %s): the "
                          "stale-run retry starts them once their lease expires", len(left), reason,
                          type(store_exc).__name__, store_exc)
                raise exc from store_exc
            log.warning("%d run(s) claimed but not started, marked failed for the stale-run retry: %s (%s)",
                        len(left), ", ".join(left), reason)
            if isinstance(exc, TransientError):
                raise TransientError(
                    f"{exc}; run(s) {', '.join(left)} marked failed, the stale-run retry starts them again"
                ) from exc
            raise
