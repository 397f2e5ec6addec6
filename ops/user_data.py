"""A person's data on request (design §12): erasure, export and the deletion of one item,
for the HTTP API and the maintenance queue.

Every call into the erasure code (``pipeline.forgetting``, ``pipeline.export``, ``pipeline.erasure``,
``pipeline.formation.rebuild``) goes through this module, so that a change there is a
change here only. Jobs (``schemas.access.Job``) run on the maintenance queue
(``workers.maintenance.run_job``): a forget, or a deletion that must merge a blob again with
the LLM, can outlast an HTTP request.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from pipeline import erasure, export
from pipeline.errors import InvalidInput
from pipeline.store.port import Store
from schemas.access import AuditEntry, Job
from schemas.documents import Fact, Reflection

def forget_user(store: Store, user_id: str, agent_id: str | None, *, settings=None, llm=None) -> dict[str, int]:
    """Everything of ``user_id`` under ``agent_id`` (None: every agent) goes (``ops.forget``),
    and their memory switches with it."""
    from pipeline.forgetting import forget_user as forget

    return forget(store, user_id, agent_id, settings=settings, llm=llm).counts


def export_user(store: Store, user_id: str, agent_id: str | None = None) -> Iterator[str]:
    """Everything stored about ``user_id`` as JSON Lines (``pipeline.export``: their messages,
    the facts and reflections resting on them with history, the blob sections that absorbed
    them, their runs' costs), read through the store's provenance queries only."""
    for record in export.export_user(store, user_id, agent_id):
        yield json.dumps(record, default=str, sort_keys=True) + "\n"


# ------------------------------------------------------------------------ one item --------
def deletion_plan(store: Store, item: Fact | Reflection) -> erasure.Plan:
    """What deleting one item removes: the item with its history, the stamps of its scope key
    (caches built over it go stale), and for a reflection a blob already absorbed, the blob
    merged again from the rest (or dropped when nothing is left)."""
    plan = erasure.Plan(stamps={item.agent_id: [item.scope_key]})
    if isinstance(item, Fact):
        plan.fact_ids.append(item.fact_id)
        return plan
    plan.reflection_ids.append(item.reflection_id)
    if item.absorbed:
        keep = tuple(i for i in store.provenance.reflection_ids(item.agent_id, item.scope_key, absorbed_only=True)
                     if i != item.reflection_id)
        if keep:
            plan.rebuild.append(erasure.Rebuild(item.agent_id, item.scope_key, keep))
        else:
            plan.drop_blobs.append((item.agent_id, item.scope_key))
    return plan


def delete_items(deps, plan: erasure.Plan, holder: str) -> dict[str, int]:
    """Execute a deletion plan: blobs merged again first (under the consolidation leases of
    their scope keys), then the items removed (``Store.erase_memory``)."""
    from pipeline.formation.rebuild import holding, rebuild_blob

    with holding(deps, plan.lease_keys(), holder):
        for target in plan.rebuild:
            rebuild_blob(deps, target, holder)
        deps.store.admin.erase_memory(plan)
    return {"facts": len(plan.fact_ids), "reflections": len(plan.reflection_ids),
            "blobs_rebuilt": len(plan.rebuild), "blobs_deleted": len(plan.drop_blobs)}


# ------------------------------------------------------------------------ jobs ------------
def run_job(job: Job, deps) -> dict[str, Any]:
    """Carry out a queued job; returns its counts (no content, no user id)."""
    if job.kind == "forget_user":
        if job.user_id is None:
            raise InvalidInput("job", f"job {job.job_id} names no user (already done?)")
        return forget_user(deps.store, job.user_id, job.agent_id, settings=deps.settings, llm=deps.llm)
    raise InvalidInput("job", f"unknown job kind {job.kind!r}")


def start_job(store: Store, job_id: str) -> Job | None:
    """The job, marked running (unless it already ended)."""
    job = store.access.get_job(job_id)
    if job is not None and job.status == "queued":
        job = job.model_copy(update={"status": "running"})
        store.access.put_job(job)
    return job


def finish_job(deps, job: Job) -> Job:
    """Run the job and store how it ended. A transient error (store, LLM) propagates so the
    task retries; any other error fails the job with its type."""
    from pipeline.errors import TransientError

    try:
        counts = run_job(job, deps)
    except TransientError:
        raise
    except Exception as exc:  # noqa: BLE001 - recorded on the job, which the caller reads
        # the type only: a message may quote the person, and the job record outlives the erasure
        return end_job(deps, job, error=type(exc).__name__)
    return end_job(deps, job, counts={k: int(v) for k, v in counts.items()})


def end_job(deps, job: Job, *, counts: dict[str, int] | None = None, error: str | None = None) -> Job:
    """Store how the job ended: ``done`` with its counts, or ``failed`` with ``error`` (the
    reason the caller reads at ``GET /v1/jobs/{id}``: no content, no user id), and audit it.
    The user id is cleared: the record must not outlive an erasure as a trace of the person."""
    ended = job.model_copy(update={
        "status": "failed" if error else "done", "counts": counts or {}, "error": error, "user_id": None,
        "finished_at": deps.clock.now(),
    })
    deps.store.access.put_job(ended)
    # the erasure itself is audited when it happened, under the credential that asked for it
    deps.store.access.record_audit(AuditEntry(
        audit_id=f"job:{job.job_id}", at=ended.finished_at, credential_id=job.requested_by or "unknown",
        credential_kind=job.requested_kind or "unknown", action=job.kind, agent_id=job.agent_id, subject=job.subject,
        outcome="ok" if ended.status == "done" else "failed", counts=ended.counts,
    ))
    return ended
