"""Stored documents of webhooks (design §13 "Operator controls"): an agent's subscriptions
and the deliveries made to them.

A delivery holds ids, kinds and timestamps, never content: content is opt-in per subscription
and read (and screened) when the delivery is sent, so an erasure between queueing and sending
leaves nothing of the person to send. ``subjects`` names the people a delivery is about, so an
erasure can find and delete them; it is never sent.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

EventKind = Literal[
    "fact.created", "fact.updated", "fact.retired", "memory.consolidated", "user.forgotten", "run.failed",
    "cap.reached",
]
EVENT_KINDS: tuple[str, ...] = get_args(EventKind)
DeliveryStatus = Literal["pending", "delivered", "failed"]


class _Doc(BaseModel):
    model_config = ConfigDict(extra="ignore")


class WebhookSubscription(_Doc):
    """Where an agent's events of the chosen kinds are sent. ``secrets`` are the signing
    secrets (``whsec_`` + base64), newest first: during a rotation every delivery is signed
    with each, so a receiver still on the old one keeps verifying."""

    subscription_id: str
    agent_id: str
    url: str
    events: list[EventKind]
    include_content: bool = False
    secrets: list[str]
    enabled: bool = True
    consecutive_failures: int = 0
    disabled_reason: str | None = None
    created_at: datetime
    updated_at: datetime


class WebhookEvent(_Doc):
    """Something that happened to an agent's memory. ``event_id`` is stable for the same
    happening (a run's fact effect, an erasure), so announcing it twice queues nothing twice."""

    event_id: str
    kind: EventKind
    agent_id: str
    occurred_at: datetime
    data: dict[str, str | int | float | None] = Field(default_factory=dict)   # ids, kinds, counts, USD: no content
    subjects: list[str] = Field(default_factory=list)   # user ids the event is about; never sent
    content_ref: str | None = None   # "fact:<id>" or "blob:<scope_key>": read when sent, if opted in


class WebhookDelivery(_Doc):
    """One event to one subscription. ``delivery_id`` is the ``webhook-id`` header: the same
    on every attempt, so the receiver can drop a repeat (at-least-once delivery)."""

    delivery_id: str
    subscription_id: str
    agent_id: str
    event: WebhookEvent
    status: DeliveryStatus = "pending"
    attempts: int = 0
    next_attempt_at: datetime
    last_status: int | None = None
    last_error: str | None = None
    delivered_at: datetime | None = None
    created_at: datetime
