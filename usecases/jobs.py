"""Queued jobs (a forget-user): queued by the HTTP API, run by ``workers.maintenance`` on the
maintenance queue, read back at ``GET /v1/jobs/{job_id}``. A forget, or a deletion that must
merge a blob again with the LLM, can outlast an HTTP request.

A request for a job that is already queued or running gets that job back (``queue_forget``).
"""

from __future__ import annotations

import hashlib
import itertools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pipeline.errors import InvalidInput, TransientError
from pipeline.store.port import Store
from schemas.access import Job, subject_digest
from usecases.audit import Actor, Audited, record
from usecases.erase import forget_user

#: how long a request may take to store and send a job it found absent before another may
#: (a request that died meanwhile leaves nothing to wait for)
CREATE_LEASE_S = 30.0
#: a job still queued this long after it was last sent is sent again when it is asked for: the
#: broker may have lost the message (a Redis restart without persistence), and a repeated
#: request would otherwise be handed a job that never runs. A second delivery is harmless: a
#: worker starts only a queued job, and the erasure holds the scopes' leases while it runs.
RESEND_AFTER_S = 600.0


@dataclass(frozen=True)
class Queued:
    """The job as it stands (new, or the one already queued or running), audited as queued."""
    job: Job

    @property
    def audit(self) -> Audited:
        return Audited("forget_user", self.job.agent_id, self.job.subject, outcome="queued")


def job_id_for(kind: str, subject: str, n: int) -> str:
    """The id of the ``n``-th job of ``kind`` about ``subject`` (0 the first): a pseudonym, as
    the subject is. Knowing it grants nothing: a job is shown only to a caller it is about."""
    return hashlib.sha256(f"{kind}\x1f{subject}\x1f{n}".encode()).hexdigest()[:32]


def queue_forget(deps, send: Callable[[str], None], actor: Actor, user_id: str, agent_id: str | None) -> Queued:
    """The forget of ``user_id`` under ``agent_id`` (None: every agent) that is queued or
    running already, or else a new one stored and handed to the maintenance queue (``send``).
    A repeated request thus returns the same job, however many arrive at once: each forget
    job's id is ``job_id_for(kind, subject, n)``, the first n whose job is absent or still
    open, and a lease on that id lets one request create it."""
    subject = subject_digest(agent_id, user_id)
    for n in itertools.count():
        candidate = job_id_for("forget_user", subject, n)
        job = deps.store.access.get_job(candidate) or _create(deps, send, actor, candidate, subject, user_id, agent_id)
        if job.status in ("queued", "running"):
            break
    return Queued(_resend_if_stale(deps, send, job))


def _create(deps, send: Callable[[str], None], actor: Actor, job_id: str, subject: str, user_id: str,
            agent_id: str | None) -> Job:
    """Store the job and send it, unless a concurrent request holds the lease on its id: that
    one creates it, and the job as it will be stored (queued) is returned. A job the broker
    did not take ends ``failed`` at once, with the reason (the request answers 503): a
    ``queued`` one would never run, and every repeated request would be handed it."""
    store, holder = deps.store, uuid.uuid4().hex
    job = Job(job_id=job_id, kind="forget_user", agent_id=agent_id, user_id=user_id, subject=subject,
              created_at=deps.clock.now(), requested_by=actor.credential_id, requested_kind=actor.kind)
    lease = f"job:{job_id}"
    if not store.leases.acquire_lease(lease, holder, deps.clock.now(), CREATE_LEASE_S):
        return job
    try:
        stored = store.access.get_job(job_id)  # created by a request whose lease has just ended
        if stored is not None:
            return stored
        store.access.put_job(job)
        try:
            send(job.job_id)
        except Exception as exc:
            end_job(deps, job, error=f"{type(exc).__name__}: not queued, the broker did not take it")
            raise
        return job
    finally:
        store.leases.release_lease(lease, holder)


def _resend_if_stale(deps, send: Callable[[str], None], job: Job) -> Job:
    """Send ``job`` to the maintenance queue again when it has waited queued for more than
    ``RESEND_AFTER_S`` since it was last sent; the job as it now stands."""
    now = deps.clock.now()
    if job.status != "queued" or (now - (job.sent_at or job.created_at)).total_seconds() <= RESEND_AFTER_S:
        return job
    job = job.model_copy(update={"sent_at": now})
    deps.store.access.put_job(job)
    send(job.job_id)
    return job


def get_job(store: Store, job_id: str) -> Job | None:
    return store.access.get_job(job_id)


# ------------------------------------------------------------------ on the worker ---------
def run_job(job: Job, deps) -> dict[str, Any]:
    """Carry out a queued job; returns its counts (no content, no user id)."""
    if job.kind == "forget_user":
        if job.user_id is None:
            raise InvalidInput("job", f"job {job.job_id} names no user (already done?)")
        return forget_user(deps.store, job.user_id, job.agent_id, settings=deps.settings, llm=deps.llm).counts
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
    # the erasure itself is audited when it happened, under the credential that asked for it;
    # its id is the job's, so a retried end records one entry
    record(deps.store.access, ended.finished_at, Actor(job.requested_by or "unknown", job.requested_kind or "unknown"),
           Audited(job.kind, job.agent_id, job.subject, ended.counts, "ok" if ended.status == "done" else "failed"),
           audit_id=f"job:{job.job_id}")
    return ended
