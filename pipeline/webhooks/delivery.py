"""One delivery attempt's decisions (design §13): the body sent, and what follows the answer.
Pure: ``pipeline.webhooks.outbox`` does the I/O.

- The body follows the Standard Webhooks payload shape, ``{"type", "timestamp", "data"}``.
- A 2xx answer delivers. 410 Gone switches the subscription off at once (the receiver says the
  endpoint is gone for good). Anything else (another status, a timeout, a refused connection)
  is retried after the next wait of the schedule, until the schedule is used up: the delivery
  is then ``failed``, and ``memoryctl webhooks redeliver`` sends it again.
- Failed attempts in a row, across deliveries, switch the subscription off past a bound; one
  success resets the count.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from schemas.webhooks import WebhookDelivery, WebhookSubscription


def body(delivery: WebhookDelivery, content: str | None = None, withheld: str | None = None) -> bytes:
    """The JSON body: the event's kind, when it happened, its ids; ``content`` only when the
    subscription opted in and it passed the screen (``withheld`` says why it is absent)."""
    event = delivery.event
    data: dict = {"agent_id": event.agent_id, **event.data}
    if content is not None:
        data["content"] = content
    if withheld is not None:
        data["content_withheld"] = withheld
    payload = {"type": event.kind, "timestamp": event.occurred_at.isoformat().replace("+00:00", "Z"), "data": data}
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True)
class Answer:
    """What one attempt got: an HTTP status, or an error before any status (timeout, refused)."""

    status: int | None = None
    error: str | None = None

    @property
    def delivered(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


@dataclass(frozen=True)
class Next:
    """What follows an attempt: the delivery's and the subscription's new state."""

    delivery: WebhookDelivery
    subscription: WebhookSubscription
    retry_at: datetime | None   # None: nothing more to send


def after(delivery: WebhookDelivery, sub: WebhookSubscription, answer: Answer, now: datetime,
          schedule: list[float], disable_after: int) -> Next:
    """The delivery and subscription once ``answer`` came back. ``schedule``: the waits before
    the 2nd, 3rd, ... attempt; ``disable_after``: failed attempts in a row that switch the
    subscription off."""
    attempts = delivery.attempts + 1
    seen = {"attempts": attempts, "last_status": answer.status, "last_error": answer.error}
    if answer.delivered:
        done = delivery.model_copy(update={**seen, "status": "delivered", "delivered_at": now, "last_error": None})
        return Next(done, sub.model_copy(update={"consecutive_failures": 0}), None)
    failures = sub.consecutive_failures + 1
    off = None
    if answer.status == 410:
        off = "the endpoint answered 410 Gone"
    elif failures >= disable_after:
        off = f"{failures} failed attempts in a row"
    sub = sub.model_copy(update={"consecutive_failures": failures, "enabled": sub.enabled and off is None,
                                 "disabled_reason": off or sub.disabled_reason, "updated_at": now})
    if off is not None or attempts > len(schedule):
        return Next(delivery.model_copy(update={**seen, "status": "failed"}), sub, None)
    retry_at = now + timedelta(seconds=schedule[attempts - 1])
    return Next(delivery.model_copy(update={**seen, "next_attempt_at": retry_at}), sub, retry_at)


def describe(answer: Answer) -> str:
    return f"HTTP {answer.status}" if answer.status is not None else (answer.error or "no answer")
