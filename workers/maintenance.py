"""Beat's tasks (maintenance queue): thin wrappers around ``pipeline.sweep``.

A transient error (the store unavailable) is retried with backoff under the one retry policy
(``MemoryTask.retry_when``); once it gives up the task fails, and beat runs the sweep again at
its next interval. A job gets the same policy, and ends ``failed`` when it gives up."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from pipeline import expiry, names, sweep
from pipeline.errors import TransientError
from workers.app import app
from workers.base import MemoryTask
from workers.deps import Deps, get_deps
from workers.dispatch import send

_Swept = TypeVar("_Swept", sweep.SweepResult, sweep.RetryResult)


def _start(deps: Deps, run_ids: list[str]) -> None:
    """Send each run's first stage; a run the broker did not take is released for the next
    stale-run retry (``sweep.start_runs``)."""
    sweep.start_runs(deps.store.runs, run_ids, lambda run_id: send(names.TASK_EXTRACT_FACTS, {"run_id": run_id}),
                     deps.clock.now())


def _sweep(task: MemoryTask, sweep_fn: Callable[..., _Swept]) -> _Swept:
    """One sweep under the retry policy, then each run it claimed or reopened started."""
    deps = get_deps()
    with task.retrying():
        result = sweep_fn(deps.store, deps.settings, deps.clock.now())
    _start(deps, result.run_ids)
    return result


@app.task(base=MemoryTask, name=names.TASK_SWEEP_COLD, bind=True)
def sweep_cold_sessions(self) -> dict:
    """Claim every cold session and start a formation run for each."""
    result = _sweep(self, sweep.sweep_cold_sessions)
    return {"claimed": len(result.run_ids), "candidates": result.candidates}


@app.task(base=MemoryTask, name=names.TASK_RETRY_STALE, bind=True)
def retry_stale_runs(self) -> dict:
    """Restart runs whose lease expired (or that failed), within the bounded attempts."""
    result = _sweep(self, lambda store, settings, now: sweep.retry_stale_runs(store.runs, settings, now))
    return {"reopened": len(result.run_ids), "dead": len(result.dead), "held": len(result.held)}


#: facts retired per store read by the expiry stamp
EXPIRY_BATCH = 500


@app.task(base=MemoryTask, name=names.TASK_STAMP_EXPIRED, bind=True)
def stamp_expired_facts(self) -> dict:
    """Retire the facts whose ``expires_at`` has passed and send the webhook deliveries that
    announce it."""
    deps = get_deps()
    with self.retrying():
        result = expiry.stamp_expired(deps.store, deps.clock.now(), EXPIRY_BATCH)
    for delivery_id in result.deliveries:
        send(names.TASK_DELIVER_WEBHOOK, {"delivery_id": delivery_id})
    return {"retired": len(result.retired), "announced": len(result.deliveries)}


@app.task(base=MemoryTask, name=names.TASK_RUN_JOB, bind=True)
def run_job(self, job_id: str) -> dict:
    """Carry out a job the HTTP API queued (``usecases.jobs.run_job``) and record how it ended
    on the job, which the caller polls. The job's user id is cleared when it ends: the record
    must not outlive an erasure as a trace of the person.

    Under the retry policy, a store outage keeps the message queued (an erasure asked for is
    not dropped, and the job could not be written anyway); when the policy gives up on any
    other transient error (the LLM down through every retry) the job ends ``failed`` with the
    reason, never left ``running``."""
    from usecases.jobs import end_job, finish_job, start_job

    deps = get_deps()
    with self.retrying(keep_message=True):
        job = start_job(deps.store, job_id)
    if job is None:
        return {"job_id": job_id, "status": "unknown"}
    if job.status in ("done", "failed"):
        return {"job_id": job_id, "status": job.status}  # a redelivery after it ended
    try:
        with self.retrying(keep_message=True):
            done = finish_job(deps, job)
    except TransientError as exc:  # the policy gave up on it: the type only, as finish_job
        done = end_job(deps, job, error=f"{type(exc).__name__}: gave up after {self.request.retries} retries")
    return {"job_id": job_id, "status": done.status}
