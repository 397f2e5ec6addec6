"""Queued jobs of the API (a forget-user): created here, run by ``workers.maintenance.run_job``
on the maintenance queue, polled at ``GET /v1/jobs/{job_id}``. A request for a job that is
already queued or running gets that job back (see ``queue_forget``)."""

from __future__ import annotations

import hashlib
import itertools
import uuid

from api.access import reach
from api.audit import audit
from api.auth import Principal
from api.errors import NotFound
from ops.user_data import end_job
from schemas import api as m
from schemas.access import Job, subject_digest

#: how long a request may take to store and send a job it found absent before another may
#: (a request that died meanwhile leaves nothing to wait for)
CREATE_LEASE_S = 30.0
#: a job still queued this long after it was last sent is sent again when it is asked for: the
#: broker may have lost the message (a Redis restart without persistence), and a repeated
#: request would otherwise be handed a job that never runs. A second delivery is harmless: a
#: worker starts only a queued job, and the erasure holds the scopes' leases while it runs.
RESEND_AFTER_S = 600.0


def job_out(job: Job) -> m.JobOut:
    return m.JobOut(job_id=job.job_id, kind=job.kind, status=job.status, agent_id=job.agent_id,
                    created_at=job.created_at, finished_at=job.finished_at, counts=job.counts, error=job.error)


def queue_forget(ctx, caller: Principal, user_id: str, agent_id: str | None) -> m.JobOut:
    """The forget of ``user_id`` under ``agent_id`` (None: every agent) that is queued or
    running already, or else a new one stored and handed to the maintenance queue; audited as
    queued either way. A repeated request thus returns the same job, however many arrive at
    once: each forget job's id is ``job_id_for(kind, subject, n)``, the first n whose job is absent
    or still open, and a lease on that id lets one request create it."""
    subject = subject_digest(agent_id, user_id)
    for n in itertools.count():
        candidate = job_id_for("forget_user", subject, n)
        job = ctx.store.access.get_job(candidate) or _create(ctx, caller, candidate, subject, user_id, agent_id)
        if job.status in ("queued", "running"):
            break
    job = _resend_if_stale(ctx, job)
    audit(ctx.store, ctx.clock.now(), caller.credential_id, caller.kind, "forget_user", agent_id=agent_id,
          subject=subject, outcome="queued")
    return job_out(job)


def job_id_for(kind: str, subject: str, n: int) -> str:
    """The id of the ``n``-th job of ``kind`` about ``subject`` (0 the first): a pseudonym, as
    the subject is. Knowing it grants nothing: a job is shown only to a caller it is about."""
    return hashlib.sha256(f"{kind}\x1f{subject}\x1f{n}".encode()).hexdigest()[:32]


def _create(ctx, caller: Principal, job_id: str, subject: str, user_id: str, agent_id: str | None) -> Job:
    """Store the job and send it, unless a concurrent request holds the lease on its id: that
    one creates it, and the job as it will be stored (queued) is returned. A job the broker
    did not take ends ``failed`` at once, with the reason (the request answers 503): a
    ``queued`` one would never run, and every repeated request would be handed it."""
    holder = uuid.uuid4().hex
    job = Job(job_id=job_id, kind="forget_user", agent_id=agent_id, user_id=user_id, subject=subject,
              created_at=ctx.clock.now(), requested_by=caller.credential_id, requested_kind=caller.kind)
    lease = f"job:{job_id}"
    if not ctx.store.leases.acquire_lease(lease, holder, ctx.clock.now(), CREATE_LEASE_S):
        return job
    try:
        stored = ctx.store.access.get_job(job_id)  # created by a request whose lease has just ended
        if stored is not None:
            return stored
        ctx.store.access.put_job(job)
        try:
            ctx.send_job(job.job_id)
        except Exception as exc:
            end_job(ctx.deps, job, error=f"{type(exc).__name__}: not queued, the broker did not take it")
            raise
        return job
    finally:
        ctx.store.leases.release_lease(lease, holder)


def _resend_if_stale(ctx, job: Job) -> Job:
    """Send ``job`` to the maintenance queue again when it has waited queued for more than
    ``RESEND_AFTER_S`` since it was last sent; the job as it now stands."""
    now = ctx.clock.now()
    if job.status != "queued" or (now - (job.sent_at or job.created_at)).total_seconds() <= RESEND_AFTER_S:
        return job
    job = job.model_copy(update={"sent_at": now})
    ctx.store.access.put_job(job)
    ctx.send_job(job.job_id)
    return job


def visible_job(ctx, caller: Principal, job_id: str) -> m.JobOut:
    """An admin sees every job; a user token the jobs about its own user under its agent."""
    job = ctx.store.access.get_job(job_id)
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
