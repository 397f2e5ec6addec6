"""Queued jobs of the API (a forget-user): created here, run by ``workers.maintenance.run_job``
on the maintenance queue, polled at ``GET /v1/jobs/{job_id}``."""

from __future__ import annotations

import uuid

from api.access import reach
from api.audit import audit
from api.auth import Principal
from api.errors import NotFound
from schemas import api as m
from schemas.access import Job, subject_digest


def job_out(job: Job) -> m.JobOut:
    return m.JobOut(job_id=job.job_id, kind=job.kind, status=job.status, agent_id=job.agent_id,
                    created_at=job.created_at, finished_at=job.finished_at, counts=job.counts, error=job.error)


def queue_forget(ctx, caller: Principal, user_id: str, agent_id: str | None) -> m.JobOut:
    """Store the job, then hand it to the maintenance queue; audited as queued."""
    subject = subject_digest(agent_id, user_id)
    job = Job(job_id=uuid.uuid4().hex, kind="forget_user", agent_id=agent_id, user_id=user_id, subject=subject,
              created_at=ctx.clock.now(), requested_by=caller.credential_id, requested_kind=caller.kind)
    ctx.store.put_job(job)
    ctx.send_job(job.job_id)
    audit(ctx.store, ctx.clock.now(), caller.credential_id, caller.kind, "forget_user", agent_id=agent_id,
          subject=subject, outcome="queued")
    return job_out(job)


def visible_job(ctx, caller: Principal, job_id: str) -> m.JobOut:
    """An admin sees every job; a user token the jobs about its own user under its agent."""
    job = ctx.store.get_job(job_id)
    if job is not None and caller.kind != "admin":
        if caller.kind != "user" or job.agent_id != caller.agent_id:
            job = None
        else:
            reach(caller, job.agent_id)
            if job.subject != subject_digest(job.agent_id, caller.user_id):  # type: ignore[arg-type]
                job = None
    if job is None:
        raise NotFound("no such job for this credential", "path job_id")
    return job_out(job)
