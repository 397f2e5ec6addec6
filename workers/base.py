"""The one base task: log context with the run and session ids, timing, a span per task run,
and the error policy: transient errors to Celery retries (backoff, jitter, Retry-After,
bounded), and a formation run's stage under ``guarded`` (``workers.formation`` says how each
error type ends). Every limit is read from one settings object, the workers' (``workers.deps``).

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
import logging
import random
import time
from collections.abc import Callable, Iterator
from typing import Any

from celery import Task
from celery.exceptions import Retry
from opentelemetry.trace import SpanKind

from pipeline import names, tracing
from pipeline.errors import InvalidLLMAnswer, PermanentError, StoreUnavailable, TransientError
from pipeline.formation.runner import RunNotFound
from workers.deps import get_deps

log = logging.getLogger("memory.tasks")
# a formation run failed, dead or left to the sweep: said where operators have always read it
run_log = logging.getLogger("memory.formation")


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

    def trace_parent(self, kwargs):
        """The context this task's span continues (see the module docstring); None: a new trace."""
        carried = tracing.context_from({key: value for key in ("traceparent", "tracestate")
                                        if isinstance(value := getattr(self.request, key, None), str)})
        run_id = kwargs.get("run_id")
        if run_id and tracing.enabled() and (carried is None or self.name == names.TASK_EXTRACT_FACTS):
            try:
                run = get_deps().store.get_run(run_id)
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

    def retry_delay(self, exc: TransientError) -> float:
        """Exponential backoff with full jitter, never shorter than the provider's Retry-After,
        never longer than the broker's visibility timeout allows."""
        settings = get_deps().settings
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
        if isinstance(exc, InvalidLLMAnswer):
            return min(settings.llm_invalid_answer_retries, settings.task_max_retries)
        return settings.task_max_retries

    def retry_transient(self, exc: TransientError, *, keep_message: bool = False):
        """Retry a transient error, or re-raise it once the bounded attempts are used up; with
        ``keep_message``, a store outage past them keeps the message queued instead."""
        bound = self.retry_bound(exc)
        if self.request.retries >= bound:
            if keep_message and isinstance(exc, StoreUnavailable):
                delay = self.retry_delay(exc)
                log.error("%s: the store stayed unavailable through %d retries; the message stays queued and is "
                          "tried again in %.0f s: %s", self.name, self.request.retries, delay, exc)
                tracing.add_event("retry", {"memory.attempt": self.request.retries + 1,
                                            "memory.countdown_s": round(delay, 3), "error.type": type(exc).__name__})
                raise self.retry(exc=exc, countdown=delay, max_retries=None)
            tracing.add_event("retries_exhausted", {"memory.retries": self.request.retries,
                                                    "error.type": type(exc).__name__})
            raise exc
        countdown = self.retry_delay(exc)
        # the error's type only: its message may quote what the provider was sent
        tracing.add_event("retry", {"memory.attempt": self.request.retries + 1, "memory.countdown_s": round(countdown, 3),
                                    "error.type": type(exc).__name__})
        raise self.retry(exc=exc, countdown=countdown, max_retries=bound)

    @contextlib.contextmanager
    def retrying(self, *, keep_message: bool = False) -> Iterator[None]:
        """A transient error raised inside is retried by ``retry_transient``."""
        try:
            yield
        except TransientError as exc:
            self.retry_transient(exc, keep_message=keep_message)

    def retry_if_left(self, exc: TransientError) -> None:
        """Retry ``exc`` (raises Celery's ``Retry``) while bounded retries are left; return once
        they are spent, for the caller to give up its own way."""
        if self.request.retries < self.retry_bound(exc):
            self.retry_transient(exc)

    def retry_with(self, kwargs: dict, exc: TransientError):
        """Retry with other arguments (a batch's events not reached yet); past the bounded
        retries, as ``retry_transient(keep_message=True)``."""
        max_retries = get_deps().settings.task_max_retries
        if self.request.retries >= max_retries:
            self.retry_transient(exc, keep_message=True)
        raise self.retry(kwargs=kwargs, exc=exc, countdown=self.retry_delay(exc), max_retries=max_retries)

    def guarded(self, run_id: str, stage: str, fn: Callable[[Any], Any],
                on_exhausted: Callable[[Any, TransientError], Any] | None = None) -> Any:
        """Run ``fn(deps)``, a stage of a formation run, under the policy of
        ``workers.formation``. Returns its result, or None when the run was failed or left to
        the stale-run sweep (the chain stops here)."""
        deps = get_deps()
        try:
            return self._run_stage(deps, run_id, stage, fn, on_exhausted)
        except StoreUnavailable as exc:
            self.retry_if_left(exc)
            run_log.warning("run %s %s: the store stayed unavailable through %d retries (%s); the run keeps its "
                        "lease and the stale-run sweep reopens it once that expires",
                        run_id, stage, self.request.retries, exc)
            return None

    def _run_stage(self, deps, run_id: str, stage: str, fn: Callable[[Any], Any],
                   on_exhausted: Callable[[Any, TransientError], Any] | None) -> Any:
        try:
            return fn(deps)
        except StoreUnavailable:
            raise
        except RunNotFound as exc:
            run_log.error("%s: %s", stage, exc)
            return None
        except PermanentError as exc:
            _fail(deps, run_id, stage, exc, dead=True)
            return None
        except TransientError as exc:
            _fail_stage(deps, run_id, stage, exc)
            self.retry_if_left(exc)
            if on_exhausted is not None:
                return on_exhausted(deps, exc)
            _fail(deps, run_id, stage, exc, dead=False, retries=self.request.retries)
            return None
        except Exception as exc:
            _fail(deps, run_id, stage, exc, dead=False)
            raise


def _fail_stage(deps, run_id: str, stage: str, exc: Exception) -> None:
    try:
        deps.store.fail_stage(run_id, stage, f"{type(exc).__name__}: {exc}", deps.clock.now())
    except KeyError:  # the run is gone; nothing to record
        pass


def _fail(deps, run_id: str, stage: str, exc: Exception, *, dead: bool, retries: int | None = None) -> None:
    after = f" after {retries} retries" if retries is not None else ""
    reason = f"{stage}: {type(exc).__name__}{after}: {exc}"
    run_log.warning("run %s %s: %s", run_id, "dead" if dead else "failed", reason)
    _fail_stage(deps, run_id, stage, exc)
    deps.store.fail_run(run_id, reason, deps.clock.now(), dead=dead)


__all__ = ["MemoryTask", "PermanentError", "StoreUnavailable", "TransientError"]
