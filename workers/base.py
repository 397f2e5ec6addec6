"""The one base task: log context with the run and session ids, timing, a span per task run,
and the one retry policy, ``MemoryTask.retry_when``: from an error's type, the retries spent
and the settings it decides ``retry`` (a Celery retry with backoff, jitter, Retry-After,
bounded), ``keep`` (a message kept queued), ``give_up`` (the caller ends its work) or ``fail``.
Every task applies it through ``MemoryTask.retrying``; a formation stage also has its failure
recorded on its run (``pipeline.formation.runner.guard_stage``, via ``workers.formation.guarded``).
Every limit is read from one settings object, the workers' (``workers.deps``).

The span joins the trace its sender was in (the ``traceparent`` header ``workers.dispatch``
adds). A run's first stage, and any stage that arrives without the header (a Celery retry),
joins the trace stored on its run instead (``FormationRun.trace_context``, set when the run
was claimed), so a run started by the sweep, replayed or redelivered stays one trace.

A store outage (``StoreUnavailable``) retries like any transient error. A task whose message
must never be dropped (ingest: the event exists nowhere else) keeps it in the broker once the
bounded retries are spent (``keep_message``): it is retried again at the backoff ceiling, and
again, until the store is back, with an ERROR line each time. A requeue (``Reject``) would
keep it too, but hands it straight back: a failover answering at once ("not primary") then
spins the worker through the queue, hundreds of attempts a second in the Mongo scenario of
``bench.reliability``.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import random
import time
from collections.abc import Iterator

from celery import Task
from celery.exceptions import Retry
from opentelemetry.trace import SpanKind

from pipeline import names, tracing
from pipeline.errors import (
    InvalidLLMAnswer, PermanentError, SpendDeferred, StoreUnavailable, Throttled, TransientError,
)
from workers.deps import get_deps

log = logging.getLogger("memory.tasks")


class Outcome(enum.StrEnum):
    """What ``MemoryTask.retry_when`` decides for an error."""

    RETRY = "retry"        # a Celery retry after a backoff, within the bounded retries
    KEEP = "keep"          # past them, but kept queued: retried at the backoff ceiling
    GIVE_UP = "give_up"    # past them: the work ends (failed, skipped, left to the sweep)
    FAIL = "fail"          # never worth retrying: permanent, invalid input or a bug


class MemoryTask(Task):
    abstract = True
    acks_late = True
    reject_on_worker_lost = True
    # retries are decided by ``retry_when`` alone; nothing else retries (no autoretry_for):
    # each retry states its own bound, read from the settings (``retry_bound``)
    max_retries = None

    def log_context(self, args, kwargs) -> dict:
        ctx = {"task": self.name, "task_id": getattr(self.request, "id", None)}
        for key in ("run_id", "session_id", "agent_id", "scope_key"):
            if key in kwargs:
                ctx[key] = kwargs[key]
        if args and "run_id" not in ctx and isinstance(args[0], str):
            ctx["run_id"] = args[0]
        return ctx

    def trace_parent(self, kwargs):
        """The context this task's span continues (see the module docstring); None: a new trace."""
        carried = tracing.context_from({key: value for key in ("traceparent", "tracestate")
                                        if isinstance(value := getattr(self.request, key, None), str)})
        run_id = kwargs.get("run_id")
        if run_id and tracing.enabled() and (carried is None or self.name == names.TASK_EXTRACT_FACTS):
            try:
                run = get_deps().store.runs.get_run(run_id)
            except Exception as exc:  # noqa: BLE001 - said below; the stage meets the store itself
                # a trace must never fail a task: the stage's own read of the run raises it again,
                # under the retry policy, and this span starts from the header (or a new trace)
                log.warning("run %s: its trace context was not read (%s: %s)", run_id, type(exc).__name__, exc)
                return carried
            if run is not None and run.trace_context:
                return tracing.context_from(run.trace_context)
        return carried

    def __call__(self, *args, **kwargs):
        ctx = self.log_context(args, kwargs)
        started = time.perf_counter()
        log.debug("task start", extra={"ctx": ctx})
        attributes = {f"memory.{k}": v for k, v in ctx.items() if k not in ("task", "task_id")}
        attributes.update({"messaging.system": "celery", "messaging.message.id": ctx["task_id"],
                           "memory.task": self.name, "memory.retries": getattr(self.request, "retries", 0)})
        try:
            with tracing.span(self.name.removeprefix("memory."), attributes, parent=self.trace_parent(kwargs),
                              kind=SpanKind.CONSUMER, expected=(Retry,)):
                return super().__call__(*args, **kwargs)
        finally:
            ctx["ms"] = round((time.perf_counter() - started) * 1000, 2)
            log.info("task end %s", ctx, extra={"ctx": ctx})

    def retry_when(self, exc: BaseException, *, keep_message: bool = False) -> Outcome:
        """The one retry policy: what becomes of ``exc`` raised by this delivery, from its type,
        the retries already spent (``request.retries``) and the settings.

        - ``RETRY``: a ``TransientError`` with bounded retries left (``retry_bound``), and a run
          over a hard spend cap (``SpendDeferred``) always: it waits until the cap allows;
        - ``KEEP``: past them, a store outage of a message that exists nowhere else
          (``keep_message``): it stays queued, retried at the backoff ceiling until the store
          is back;
        - ``GIVE_UP``: past them otherwise; the caller ends its work its own way (the run or
          the job ``failed`` with the reason, a busy scope skipped), or the task fails;
        - ``FAIL``: not worth retrying (permanent, invalid input, a bug, Celery's own
          ``Retry``/``Reject``): the caller's ending, or the task fails.
        """
        if not isinstance(exc, TransientError):
            return Outcome.FAIL
        if isinstance(exc, SpendDeferred):  # waits out the cap's window, however long: not a failure
            return Outcome.RETRY
        if self.request.retries < self.retry_bound(exc):
            return Outcome.RETRY
        if keep_message and isinstance(exc, StoreUnavailable):
            return Outcome.KEEP
        return Outcome.GIVE_UP

    @contextlib.contextmanager
    def retrying(self, *, keep_message: bool = False, kwargs: dict | None = None) -> Iterator[None]:
        """Apply ``retry_when`` to an error raised inside. ``RETRY`` and ``KEEP`` raise Celery's
        ``Retry`` through ``Task.retry`` (a new message with ``retries + 1`` and the countdown;
        the delivery is then acked: with ``acks_late`` only a lost worker requeues it,
        https://docs.celeryq.dev/en/stable/userguide/tasks.html#retrying), with ``kwargs`` in
        place of the delivery's own when given. ``GIVE_UP`` and ``FAIL`` raise the error again:
        a ``TransientError`` leaving this block means the policy gave up on it."""
        try:
            yield
        except Exception as exc:
            outcome = self.retry_when(exc, keep_message=keep_message)
            if outcome is Outcome.RETRY or outcome is Outcome.KEEP:
                raise self._retry(exc, outcome, kwargs)
            if outcome is Outcome.GIVE_UP:
                tracing.add_event("retries_exhausted", {"memory.retries": self.request.retries,
                                                        "error.type": type(exc).__name__})
            raise

    def _retry(self, exc: TransientError, outcome: Outcome, kwargs: dict | None) -> Retry:
        countdown = self.retry_delay(exc)
        # Celery refuses a retry past ``max_retries`` by raising ``exc`` (``Task.retry``): a
        # bounded retry states its bound, a kept message none
        bound = None if outcome is Outcome.KEEP or isinstance(exc, SpendDeferred) else self.retry_bound(exc)
        if outcome is Outcome.KEEP:
            log.error("%s: the store stayed unavailable through %d retries; the message stays queued and is "
                      "tried again in %.0f s: %s", self.name, self.request.retries, countdown, exc)
        # the error's type only: its message may quote what the provider was sent
        tracing.add_event("retry", {"memory.attempt": self.request.retries + 1, "memory.countdown_s": round(countdown, 3),
                                    "error.type": type(exc).__name__})
        return self.retry(exc=exc, kwargs=kwargs, countdown=countdown, max_retries=bound)

    def retry_delay(self, exc: TransientError) -> float:
        """Exponential backoff with full jitter, never shorter than the provider's Retry-After,
        never longer than the broker's visibility timeout allows. A call waiting for its turn
        under a shared rate limit (``Throttled``) is sent again when the turn comes (a little
        jitter, so waiters do not all wake at once), within half the run's lease, which its
        next start renews; so is a run over a hard spend cap (``SpendDeferred``), to look again."""
        settings = get_deps().settings
        if isinstance(exc, Throttled):
            wait = (exc.retry_after or 1.0) * random.uniform(1.0, 1.1)
            return min(wait, settings.claim_lease_s / 2, settings.broker_visibility_timeout_s / 2)
        attempt = self.request.retries
        ceiling = min(settings.task_retry_backoff_max_s, 2 ** attempt)
        delay = random.uniform(ceiling / 2, ceiling)
        if exc.retry_after:
            delay = max(delay, exc.retry_after)
        return min(delay, settings.broker_visibility_timeout_s / 2)

    def retry_bound(self, exc: TransientError) -> int:
        """How many retries ``exc`` gets: an answer the model gave but that cannot be used (a
        refusal, a content filter, a length stop, an answer outside its schema) is asked again
        ``MEMORY_LLM_INVALID_ANSWER_RETRIES`` times, since it mostly comes back the same;
        timeouts, 429, 5xx and outages ``MEMORY_TASK_MAX_RETRIES`` times."""
        settings = get_deps().settings
        if isinstance(exc, Throttled):  # a wait for a turn, not a failure
            return settings.llm_rate_max_requeues
        if isinstance(exc, InvalidLLMAnswer):
            return min(settings.llm_invalid_answer_retries, settings.task_max_retries)
        return settings.task_max_retries


__all__ = ["MemoryTask", "Outcome", "PermanentError", "StoreUnavailable", "TransientError"]
