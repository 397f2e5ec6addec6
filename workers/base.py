"""The one base task: log context with the run and session ids, timing, and the mapping of
transient errors to Celery retries (backoff, jitter, Retry-After, bounded).

A store outage (``StoreUnavailable``) retries like any transient error. A task whose message
must never be dropped (ingest: the event exists nowhere else) keeps it in the broker once the
bounded retries are spent (``keep_message``): it is retried again at the backoff ceiling, and
again, until the store is back, with an ERROR line each time. A requeue (``Reject``) would
keep it too, but hands it straight back: a failover answering at once ("not primary") then
spins the worker through the queue, hundreds of attempts a second in the Mongo scenario of
``ops.bench.reliability``."""

from __future__ import annotations

import logging
import random
import time

from celery import Task

from pipeline.errors import PermanentError, StoreUnavailable, TransientError
from schemas.settings import get_settings

log = logging.getLogger("memory.tasks")


class MemoryTask(Task):
    abstract = True
    acks_late = True
    reject_on_worker_lost = True
    # retries are decided here by error type; nothing else retries (no autoretry on Exception)
    max_retries = None  # read from settings in retry_delay

    def log_context(self, args, kwargs) -> dict:
        ctx = {"task": self.name, "task_id": getattr(self.request, "id", None)}
        for key in ("run_id", "session_id", "agent_id", "scope_key"):
            if key in kwargs:
                ctx[key] = kwargs[key]
        if args and "run_id" not in ctx and isinstance(args[0], str):
            ctx["run_id"] = args[0]
        return ctx

    def __call__(self, *args, **kwargs):
        ctx = self.log_context(args, kwargs)
        started = time.perf_counter()
        log.debug("task start", extra={"ctx": ctx})
        try:
            return super().__call__(*args, **kwargs)
        finally:
            ctx["ms"] = round((time.perf_counter() - started) * 1000, 2)
            log.info("task end %s", ctx, extra={"ctx": ctx})

    def retry_delay(self, exc: TransientError) -> float:
        """Exponential backoff with full jitter, never shorter than the provider's Retry-After,
        never longer than the broker's visibility timeout allows."""
        settings = get_settings()
        attempt = self.request.retries
        ceiling = min(settings.task_retry_backoff_max_s, 2 ** attempt)
        delay = random.uniform(ceiling / 2, ceiling)
        if exc.retry_after:
            delay = max(delay, exc.retry_after)
        return min(delay, settings.broker_visibility_timeout_s / 2)

    def retry_transient(self, exc: TransientError, *, keep_message: bool = False):
        """Retry a transient error, or re-raise it once the bounded attempts are used up; with
        ``keep_message``, a store outage past them keeps the message queued instead."""
        settings = get_settings()
        if self.request.retries >= settings.task_max_retries:
            if keep_message and isinstance(exc, StoreUnavailable):
                delay = self.retry_delay(exc)
                log.error("%s: the store stayed unavailable through %d retries; the message stays queued and is "
                          "tried again in %.0f s: %s", self.name, self.request.retries, delay, exc)
                raise self.retry(exc=exc, countdown=delay, max_retries=None)
            raise exc
        raise self.retry(exc=exc, countdown=self.retry_delay(exc), max_retries=settings.task_max_retries)


__all__ = ["MemoryTask", "PermanentError", "StoreUnavailable", "TransientError"]
