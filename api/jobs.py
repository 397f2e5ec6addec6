"""Queued jobs of the API (a forget-user): queued through ``usecases.jobs``, run by
``workers.maintenance.run_job`` on the maintenance queue, polled at ``GET /v1/jobs/{job_id}``
by an admin or the user a job is about."""

from __future__ import annotations

from api.access import reach
from api.audit import actor, audited
from api.auth import Principal
from api.errors import NotFound
from schemas import api as m
from schemas.access import Job, subject_digest
from usecases import jobs


def job_out(job: Job) -> m.JobOut:
    return m.JobOut(job_id=job.job_id, kind=job.kind, status=job.status, agent_id=job.agent_id,
                    created_at=job.created_at, finished_at=job.finished_at, counts=job.counts, error=job.error)


def queue_forget(ctx, caller: Principal, user_id: str, agent_id: str | None) -> m.JobOut:
    """The forget of ``user_id`` under ``agent_id`` (None: every agent) already queued or
    running, or else a new one (``usecases.jobs.queue_forget``); audited as queued either way."""
    return job_out(audited(ctx, caller, jobs.queue_forget(ctx.deps, ctx.send_job, actor(caller), user_id,
                                                          agent_id)).job)


def visible_job(ctx, caller: Principal, job_id: str) -> m.JobOut:
    """An admin sees every job; a user token the jobs about its own user under its agent."""
    job = jobs.get_job(ctx.store, job_id)
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
