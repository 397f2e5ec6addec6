"""Backfill after a pause (design §13): on an explicit request, form a resumed scope from the
messages that arrived while it was paused.

While a scope is paused, runs still claim and finish their ranges (nothing is formed twice)
and record the scopes they formed (``FormationRun.scopes_enabled``). A backfill finds the
finished runs of the pause that left the resumed scope out and stores, for each, a new run
over the same range that forms that scope alone (``only_scopes``; the whole agent: every
scope). It takes no session claim and its effects are the ordinary ones: facts through dedup,
reflections into the buffer, consolidation when due. A backfill run's id is its source run's
and scopes', so asking twice stores (and forms) nothing twice.
"""

from __future__ import annotations

from datetime import datetime

from pipeline.store.ports.runs import RunStore
from pipeline.store._common import lease_until
from schemas.documents import FormationRun
from schemas.owner import WHOLE_AGENT, Pause

#: runs of one pause looked at, newest first: a pause longer than this many runs is backfilled
#: for its newest ones only (a resume names how many it started)
MAX_RUNS = 10_000


def _target(key: str) -> tuple[list[str], str | None]:
    """(scope types a backfill run forms, [] for all; the session it is limited to)."""
    if key == WHOLE_AGENT:
        return [], None
    if key.startswith("session:"):
        return ["session"], key.removeprefix("session:")
    return [key], None


def _missed(run: FormationRun, scopes: list[str]) -> bool:
    if run.reason == "backfill":
        return False
    return not run.scopes_enabled if not scopes else not set(scopes) & set(run.scopes_enabled)


def backfill(runs: RunStore, agent_id: str, ended: Pause, now: datetime, lease_s: float) -> list[str]:
    """Store one backfill run per finished run of the pause that left its scope out; returns
    their ids, oldest range first, for the caller to start."""
    scopes, session_id = _target(ended.scope_key)
    done = runs.list_runs(status="done", agent_id=agent_id, session_id=session_id, limit=MAX_RUNS)
    missed = [r for r in done if r.finished_at is not None and r.finished_at >= ended.paused_at and _missed(r, scopes)]
    started = []
    for run in sorted(missed, key=lambda r: (r.created_at, r.session_id, r.seq_from)):
        backfill_run = FormationRun(
            run_id=f"{run.run_id}-backfill-{'-'.join(scopes) or 'all'}", agent_id=agent_id, session_id=run.session_id, seq_from=run.seq_from,
            seq_to=run.seq_to, reason="backfill", status="claimed", created_at=now,
            lease_expires_at=lease_until(now, lease_s), user_ids=list(run.user_ids), group_chat=run.group_chat,
            tier=run.tier, only_scopes=scopes, trace_context=dict(run.trace_context),
        )
        if runs.insert_run(backfill_run):
            started.append(backfill_run.run_id)
    return started
