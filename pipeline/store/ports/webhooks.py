"""The webhooks port (design §13 "Operator controls"): an agent's subscriptions and the
deliveries queued for them. Part of ``pipeline.store.port.Store``.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from schemas.webhooks import DeliveryStatus, WebhookDelivery, WebhookSubscription


class WebhookStore(Protocol):
    """Subscriptions per agent, and deliveries: queued once per (subscription, event),
    claimed by one sender at a time, withdrawn when the person they are about is erased."""

    @abc.abstractmethod
    def put_subscription(self, sub: WebhookSubscription) -> None:
        """Insert or replace the subscription."""

    @abc.abstractmethod
    def get_subscription(self, subscription_id: str) -> WebhookSubscription | None: ...

    @abc.abstractmethod
    def list_subscriptions(self, agent_id: str | None = None) -> list[WebhookSubscription]:
        """The agent's subscriptions (every agent's: None), oldest first."""

    @abc.abstractmethod
    def delete_subscription(self, subscription_id: str) -> int:
        """Delete the subscription and its deliveries; how many documents went (0: unknown)."""

    @abc.abstractmethod
    def add_deliveries(self, deliveries: Sequence[WebhookDelivery]) -> int:
        """Queue the deliveries whose id is not queued yet (the id is derived from the
        subscription and the event: announcing twice queues once). Returns how many were new."""

    @abc.abstractmethod
    def get_delivery(self, delivery_id: str) -> WebhookDelivery | None: ...

    @abc.abstractmethod
    def list_deliveries(self, *, agent_id: str | None = None, subscription_id: str | None = None,
                        status: DeliveryStatus | None = None, limit: int = 100) -> list[WebhookDelivery]:
        """The delivery log, newest first."""

    @abc.abstractmethod
    def due_deliveries(self, now: datetime, limit: int = 100) -> list[str]:
        """Ids of pending deliveries whose next attempt is due, the longest waiting first."""

    @abc.abstractmethod
    def claim_delivery(self, delivery_id: str, now: datetime, until: datetime) -> WebhookDelivery | None:
        """*Atomic*: if the delivery is pending and due at ``now``, move its next attempt to
        ``until`` (no other sender takes it meanwhile) and return it; otherwise None."""

    @abc.abstractmethod
    def save_delivery(self, delivery: WebhookDelivery) -> bool:
        """Replace a queued delivery; False when it is gone (withdrawn by an erasure, or its
        subscription deleted), and nothing is written then."""

    @abc.abstractmethod
    def forget_deliveries(self, user_id: str, agent_id: str | None = None, *, dry_run: bool = False) -> int:
        """Delete every delivery about the user (under one agent, or all), sent or not: no
        notice about an erased person is sent later, nor kept. Returns how many went (with
        ``dry_run``: would go, deleting nothing)."""
