"""Webhook tasks (maintenance queue): thin wrappers around ``pipeline.webhooks.outbox``.

- ``deliver_webhook`` makes one attempt. A retry due within the broker's visibility timeout
  is sent again with that countdown (Celery's countdown must stay under it, docs/style.md);
  a longer wait is left to beat's ``send_due_webhooks``, which the store's due time serves.
- ``send_due_webhooks`` sends one ``deliver_webhook`` per due delivery: the retries past the
  countdown's reach, and any delivery whose task message was lost. A delivery is claimed in
  the store before it is sent, so two tasks for one delivery send it once.
"""

from __future__ import annotations

from pipeline import names
from pipeline.formation.screening import guard_for
from pipeline.webhooks import outbox
from workers.app import app
from workers.base import MemoryTask
from workers.deps import get_deps
from workers.dispatch import send

DUE_BATCH = 500


@app.task(base=MemoryTask, name=names.TASK_DELIVER_WEBHOOK, bind=True)
def deliver_webhook(self, delivery_id: str) -> dict:
    """One attempt of one delivery; hands a near retry on with its countdown."""
    deps = get_deps()
    settings = deps.settings
    with self.retrying():
        now = deps.clock.now()
        done = outbox.attempt(deps.store, deps.webhook_sender, guard_for(settings), delivery_id, now,
                              schedule=settings.webhook_retry_schedule_s, disable_after=settings.webhook_disable_after)
    if done.retry_at is not None:
        wait = (done.retry_at - now).total_seconds()
        if wait < settings.broker_visibility_timeout_s:
            send(names.TASK_DELIVER_WEBHOOK, {"delivery_id": delivery_id}, countdown=max(wait, 0.0))
    return {"delivery_id": delivery_id, "outcome": done.outcome, "detail": done.detail}


@app.task(base=MemoryTask, name=names.TASK_SEND_DUE_WEBHOOKS, bind=True)
def send_due_webhooks(self) -> dict:
    """Send every delivery whose attempt is due."""
    deps = get_deps()
    with self.retrying():
        due = deps.store.webhooks.due_deliveries(deps.clock.now(), DUE_BATCH)
    for delivery_id in due:
        send(names.TASK_DELIVER_WEBHOOK, {"delivery_id": delivery_id})
    return {"sent": len(due)}
