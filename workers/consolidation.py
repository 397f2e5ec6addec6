"""Consolidation tasks: one consolidate_scope per due scope key of a run (run in parallel on
the consolidation queue), and consolidate_session for an ended session with no run.

Fan-in is store-based (see ``pipeline.formation.consolidate_stages``): each consolidate_scope
completes its own stage record on the run and whoever then sees all of them done sends
``finish``, which is idempotent. A chord would need a result backend and would lose its
counter with it; the store already holds the truth and survives worker crashes.

A scope whose lease stays busy through every retry is skipped for this run (its buffer stays,
the next consolidation merges it); any other exhausted failure fails the run (retried by the
stale-run sweep), and nothing in the buffer is lost either way.
"""

from __future__ import annotations

import logging

from pipeline import names
from pipeline.errors import PermanentError, TransientError
from pipeline.formation import consolidate_stages as cs
from pipeline.formation.runner import fail_run
from workers.app import app
from workers.base import MemoryTask
from workers.deps import get_deps
from workers.dispatch import send
from workers.formation import guarded

log = logging.getLogger("memory.consolidation")


@app.task(base=MemoryTask, name=names.TASK_CONSOLIDATE_SCOPE, bind=True)
def consolidate_scope(self, run_id: str, index: int, scope_key: str | None = None) -> dict | None:
    """Merge one due scope key of a run under its lease; the last one done sends finish."""
    stage = cs.scope_stage(index)

    def busy_for_good(deps, exc: TransientError):
        if isinstance(exc, cs.ScopeBusy):
            return cs.skip_scope(run_id, index, str(exc), deps)
        return fail_run(deps, run_id, stage, exc, dead=False, retries=self.request.retries)

    result = guarded(self, run_id, stage, lambda deps: cs.consolidate_scope(run_id, index, deps), busy_for_good)
    if result is None:
        return None
    with self.retrying():  # the scope's stage is complete: a rerun reuses it
        done = cs.scopes_done(get_deps(), run_id)
    if done:
        send(names.TASK_FINISH, {"run_id": run_id})
    return {"scope_key": getattr(result.value, "scope_key", scope_key), "status": result.value.status}


@app.task(base=MemoryTask, name=names.TASK_CONSOLIDATE_SESSION, bind=True)
def consolidate_session(self, agent_id: str, session_id: str) -> list[dict] | None:
    """Consolidate every scope holding unabsorbed reflections of an ended session (no run)."""
    deps = get_deps()
    try:
        with self.retrying():
            return cs.consolidate_session(agent_id, session_id, deps)
    except PermanentError as exc:
        log.error("consolidate_session %s/%s: %s (the buffers stay)", agent_id, session_id, exc)
        return None
    except TransientError as exc:  # the policy gave up on it
        log.warning("consolidate_session %s/%s gave up: %s (the buffers stay)", agent_id, session_id, exc)
        return None
