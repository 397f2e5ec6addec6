"""The one way this project sends a task: ``send(name, kwargs)``.

Every hand-on between stages, every run start (ingest, beat's sweeps, ``memoryctl
replay-failed``, ``MemoryService.process_cold_session``) and every producer publish goes
through here, so each send

- ignores its result: no task returns anything a caller waits for, and the project runs no
  result backend (``MEMORY_RESULT_BACKEND`` is empty by default). A send that did not ignore
  it would contact Celery's default backend and fail when there is none;
- carries redacted ``argsrepr`` / ``kwargsrepr`` (``workers.redaction``): Flower and the task
  events show ids, counts and sizes, never a message;
- carries the current trace context in its headers (W3C ``traceparent``), so the task it
  starts is a span of the same trace (``workers.base`` picks it up); empty when untraced;
- retries a lost broker ``publish_retry_max`` times, then raises ``TransientError`` naming the
  task and the broker (password masked), never the arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kombu.utils.url import maybe_sanitize_url

from pipeline import tracing
from pipeline.errors import TransientError
from schemas.settings import get_settings
from workers.redaction import reprs


class Sent:
    """What ``send_task`` builds instead of an ``AsyncResult``: the task id only. The stock
    result class would build a result backend for nothing, one per worker thread (a Redis
    client and pool each) the first time that thread sends."""

    __slots__ = ("id", "ignored")

    def __init__(self, id: str, *_: Any, **__: Any) -> None:
        self.id = id
        self.ignored = True


def send(
    name: str, kwargs: Mapping[str, Any], *, countdown: float | None = None, app=None,
    producer=None, retry_max: int | None = None,
) -> None:
    """Send task ``name`` with keyword arguments ``kwargs``, results ignored. ``app`` defaults
    to ``workers.app.app``; ``producer`` is a kombu producer to publish with (the producer API
    keeps its own connection with socket timeouts)."""
    if app is None:
        from workers.app import app
    if retry_max is None:
        retry_max = get_settings().publish_retry_max
    argsrepr, kwargsrepr = reprs((), kwargs)
    try:
        app.send_task(
            name, kwargs=dict(kwargs), countdown=countdown, producer=producer,
            ignore_result=True, result_cls=Sent, argsrepr=argsrepr, kwargsrepr=kwargsrepr,
            headers=tracing.carrier(),
            retry=True,
            retry_policy={"max_retries": retry_max, "interval_start": 0.1, "interval_step": 0.5, "interval_max": 2.0},
        )
    except (TypeError, ValueError):
        raise  # not JSON-serialisable: a programming error, not the broker's
    except Exception as exc:  # kombu and redis-py connection errors, after the retries
        broker = maybe_sanitize_url(app.conf.broker_url) or "<broker>"
        raise TransientError(
            f"the broker at {broker} did not accept {name} after {retry_max} retries: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
