"""The periodic schedule of ``celery beat`` (design §9). Nothing else is hidden in it:

- the cold-session sweep, every ``MEMORY_SWEEP_INTERVAL_S`` (10 minutes by default);
- the retry of runs whose lease expired (and of failed runs), every
  ``MEMORY_RETRY_STALE_INTERVAL_S``;
- the stamp of facts past their ``expires_at`` (retired, reason ``expired``), every
  ``MEMORY_EXPIRY_INTERVAL_S``;
- the send of webhook deliveries that are due (retries past the first, and any whose task
  message was lost), every ``MEMORY_WEBHOOK_SWEEP_INTERVAL_S``.

Every task goes to the ``maintenance`` queue (routing in ``workers/app.py``). Each entry expires
after one interval, so a backlog of sweeps never piles up behind a stopped maintenance worker.
"""

from __future__ import annotations

from pipeline import names
from schemas.settings import Settings


def build_schedule(settings: Settings) -> dict:
    """The ``beat_schedule`` mapping for the Celery app."""
    return {
        "sweep-cold-sessions": _every(names.TASK_SWEEP_COLD, settings.sweep_interval_s),
        "retry-stale-runs": _every(names.TASK_RETRY_STALE, settings.retry_stale_interval_s),
        "stamp-expired-facts": _every(names.TASK_STAMP_EXPIRED, settings.expiry_interval_s),
        "send-due-webhooks": _every(names.TASK_SEND_DUE_WEBHOOKS, settings.webhook_sweep_interval_s),
    }


def _every(task: str, interval_s: float) -> dict:
    """One entry: the task on the maintenance queue every ``interval_s``, expiring after one
    interval so that a backlog never piles up behind a stopped worker."""
    return {"task": task, "schedule": float(interval_s),
            "options": {"queue": names.QUEUE_MAINTENANCE, "expires": float(interval_s)}}
