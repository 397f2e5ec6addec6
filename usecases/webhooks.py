"""An agent's webhook subscriptions and their deliveries (design §13 "Operator controls"), as
``/v1/agents/{a}/webhooks`` and ``memoryctl webhooks`` ask: subscribe, list, rotate the signing
secret, switch back on, remove; read the delivery log and queue deliveries again. Each change
names its audit entry (the subscription's id, never its URL or secret)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from pipeline.store.ports.webhooks import WebhookStore
from pipeline.webhooks import outbox, subscriptions
from schemas.webhooks import WebhookDelivery, WebhookSubscription
from usecases.audit import Audited


@dataclass(frozen=True)
class Changed:
    """The subscription as stored after the change (a new secret in it is shown once)."""
    action: Literal["webhook.create", "webhook.rotate", "webhook.enable", "webhook.delete"]
    subscription: WebhookSubscription
    #: deliveries of its log removed with it (``remove``)
    deliveries: int = 0

    @property
    def audit(self) -> Audited:
        return Audited(self.action, self.subscription.agent_id, self.subscription.subscription_id)


@dataclass(frozen=True)
class Redelivered:
    """The deliveries queued again, due now, under one agent."""
    agent_id: str | None
    queued: list[str]

    @property
    def audit(self) -> Audited:
        return Audited("webhook.redeliver", self.agent_id, counts={"queued": len(self.queued)})


def owned(webhooks: WebhookStore, subscription_id: str, agent_id: str | None) -> WebhookSubscription | None:
    """The subscription if it is the agent's (any agent's: None); the same None for another
    agent's as for none, so ids are not probed."""
    return subscriptions.owned(webhooks, subscription_id, agent_id)


def listed(webhooks: WebhookStore, agent_id: str | None) -> list[WebhookSubscription]:
    return webhooks.list_subscriptions(agent_id)


def subscribe(webhooks: WebhookStore, agent_id: str, url: str, events: Iterable[str], now: datetime, *,
              include_content: bool = False) -> Changed:
    return Changed("webhook.create", subscriptions.subscribe(webhooks, agent_id, url, events, now,
                                                             include_content=include_content))


def rotate(webhooks: WebhookStore, sub: WebhookSubscription, now: datetime, *, drop_old: bool = False) -> Changed:
    return Changed("webhook.rotate", subscriptions.rotate(webhooks, sub, now, drop_old=drop_old))


def enable(webhooks: WebhookStore, sub: WebhookSubscription, now: datetime) -> Changed:
    return Changed("webhook.enable", subscriptions.enable(webhooks, sub, now))


def remove(webhooks: WebhookStore, sub: WebhookSubscription) -> Changed:
    """The subscription and its delivery log deleted."""
    gone = webhooks.delete_subscription(sub.subscription_id)
    return Changed("webhook.delete", sub, max(gone - 1, 0))


def deliveries(webhooks: WebhookStore, *, agent_id: str | None = None, subscription_id: str | None = None,
               status: str | None = None, limit: int = 100) -> list[WebhookDelivery]:
    """The delivery log, newest first."""
    return webhooks.list_deliveries(agent_id=agent_id, subscription_id=subscription_id, status=status, limit=limit)


def redeliver(webhooks: WebhookStore, delivery_ids: Sequence[str], now: datetime, *, agent_id: str | None = None,
              failed_of: str | None = None) -> Redelivered:
    """Queue the named deliveries again (under ``agent_id``: only that agent's), and every
    failed one of agent ``failed_of``."""
    ids = list(delivery_ids)
    if agent_id is not None:
        ids = [d.delivery_id for d in map(webhooks.get_delivery, ids) if d and d.agent_id == agent_id]
    if failed_of is not None:
        ids += [d.delivery_id for d in webhooks.list_deliveries(agent_id=failed_of, status="failed", limit=1000)]
    return Redelivered(agent_id, outbox.redeliver(webhooks, list(dict.fromkeys(ids)), now))


def by_agent(webhooks: WebhookStore, done: Redelivered) -> list[Redelivered]:
    """``done`` once per agent whose deliveries it queued (an operator may name any agent's)."""
    agents = {d.agent_id for d in map(webhooks.get_delivery, done.queued) if d}
    return [Redelivered(agent, done.queued) for agent in sorted(agents)]
