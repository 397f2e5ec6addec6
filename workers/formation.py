"""Formation tasks: extract_facts -> embed_facts -> decide_facts -> extract_reflections ->
consolidate (fan-out to consolidate_scope, see ``workers.consolidation``) -> finish.

Thin by design: each task loads nothing itself, calls one stage function of
``pipeline.formation`` with the run id, and hands on to the next task by name. Every stage is
idempotent, so a redelivery (acks_late) or a retry reruns it safely.

Errors, decided by type (``pipeline.errors``) in ``guarded``: the task's retry policy
(``MemoryTask.retry_when``) says whether to retry, and ``pipeline.formation.runner.guard_stage``
records the failure on the run:
- ``TransientError`` (timeouts, 429 with Retry-After, 5xx, invalid LLM answers, a busy lease):
  retried with backoff and jitter; when the policy gives up (the bounded retries are used up)
  the run is marked ``failed`` with the reason, and the stale-run sweep reopens it until
  ``max_run_attempts``, then it is dead;
- ``PermanentError`` (auth, bad request, a broken chain): the run is ``dead`` at once;
- anything else is a bug: the run is marked ``failed`` (so the sweep retries it, bounded) and
  the exception is re-raised for Flower.

A store outage (``StoreUnavailable``, raised by the stage or by the bookkeeping of any branch
above) is retried the same way, but nothing is written to the store that is down: once the
retries are spent the run keeps its lease, and when that expires the stale-run sweep reopens
it, so a run outlives an outage longer than the retries without being lost or stuck.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from pipeline import names
from pipeline.errors import StoreUnavailable, TransientError
from pipeline.formation import consolidate_stages, stages
from pipeline.formation.finish import finish as finish_run
from pipeline.formation.runner import fail_run, guard_stage
from workers.app import app
from workers.base import MemoryTask, Outcome
from schemas.documents import Stage
from workers.deps import get_deps
from workers.dispatch import send

# a formation run failed, dead or left to the sweep: said where operators have always read it
log = logging.getLogger("memory.formation")


def guarded(task: MemoryTask, run_id: str, stage: str, fn: Callable[[Any], Any],
            give_up: Callable[[Any, TransientError], Any] | None = None) -> Any:
    """Run ``fn(deps)``, a stage of a formation run, under ``task``'s retry policy (see the
    module docstring). When the policy gives up on a transient error, ``give_up(deps, exc)``
    ends the stage its own way (default: the run ``failed`` with the reason). Returns the
    stage's result, or None when the run was failed, dead or left to the stale-run sweep (the
    chain stops here)."""
    deps = get_deps()
    try:
        with task.retrying():
            try:
                return guard_stage(deps, run_id, stage, fn)
            except TransientError as exc:
                if isinstance(exc, StoreUnavailable) or task.retry_when(exc) is not Outcome.GIVE_UP:
                    raise
                if give_up is not None:
                    return give_up(deps, exc)
                return fail_run(deps, run_id, stage, exc, dead=False, retries=task.request.retries)
    except StoreUnavailable as exc:  # given up; the bookkeeping above may raise it too
        log.warning("run %s %s: the store stayed unavailable through %d retries (%s); the run keeps its lease "
                    "and the stale-run sweep reopens it once that expires", run_id, stage, task.request.retries, exc)
        return None


def _stage_task(name: str, stage: str, fn, next_task: str):
    def run(self, run_id: str) -> dict | None:
        result = guarded(self, run_id, stage, lambda deps: fn(run_id, deps))
        if result is None:
            return None
        send(next_task, {"run_id": run_id})
        return {"stage": stage, "reused": result.reused}

    run.__name__ = stage
    run.__doc__ = f"The {stage} stage of one formation run; hands on to {next_task}."
    return app.task(base=MemoryTask, name=name, bind=True)(run)


extract_facts = _stage_task(names.TASK_EXTRACT_FACTS, Stage.EXTRACT_FACTS, stages.extract_facts,
                            names.TASK_EMBED_FACTS)
embed_facts = _stage_task(names.TASK_EMBED_FACTS, Stage.EMBED_FACTS, stages.embed_facts, names.TASK_DECIDE_FACTS)
decide_facts = _stage_task(names.TASK_DECIDE_FACTS, Stage.DECIDE_FACTS, stages.decide_facts,
                           names.TASK_EXTRACT_REFLECTIONS)
extract_reflections = _stage_task(names.TASK_EXTRACT_REFLECTIONS, Stage.EXTRACT_REFLECTIONS,
                                  stages.extract_reflections, names.TASK_CONSOLIDATE)


@app.task(base=MemoryTask, name=names.TASK_CONSOLIDATE, bind=True)
def consolidate(self, run_id: str) -> dict | None:
    """Decide the due scope keys and fan out one consolidate_scope each (finish when none)."""
    def fan_out(deps):
        result = consolidate_stages.consolidate(run_id, deps)
        if result is None:
            return None
        due = result.value.due
        if not result.reused:  # decided just now: no scope of it can have run yet
            return due, list(range(len(due)))
        return due, consolidate_stages.pending_scopes(deps.store.runs.get_run(run_id))

    outcome = guarded(self, run_id, Stage.CONSOLIDATE, fan_out)
    if outcome is None:
        return None
    due, pending = outcome
    for index in pending:
        send(names.TASK_CONSOLIDATE_SCOPE, {"run_id": run_id, "index": index, "scope_key": due[index]})
    if not pending:
        send(names.TASK_FINISH, {"run_id": run_id})
    return {"due": due, "sent": pending}


@app.task(base=MemoryTask, name=names.TASK_FINISH, bind=True)
def finish(self, run_id: str) -> dict | None:
    """Close the run, then start the next one or the session's leftover consolidation."""
    outcome = guarded(self, run_id, Stage.FINISH, lambda deps: finish_run(run_id, deps))
    if outcome is None:
        return None
    _, step = outcome
    if step.run_id:
        send(names.TASK_EXTRACT_FACTS, {"run_id": step.run_id})
    if step.consolidate_session:
        agent_id, session_id = step.consolidate_session
        send(names.TASK_CONSOLIDATE_SESSION, {"agent_id": agent_id, "session_id": session_id})
    for delivery_id in step.deliveries:   # a lost one is sent by beat's send_due_webhooks
        send(names.TASK_DELIVER_WEBHOOK, {"delivery_id": delivery_id})
    return {"next_run": step.run_id, "consolidate_session": bool(step.consolidate_session),
            "webhooks": len(step.deliveries)}
