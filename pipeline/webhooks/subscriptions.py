"""Managing an agent's webhook subscriptions (design §13): subscribe, rotate the signing
secret, switch back on, delete. The secret is shown once, when made; what is stored is what
signs, so a rotation keeps the previous secret signing beside the new one until dropped."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime
from urllib.parse import urlsplit

from pipeline.errors import InvalidInput
from pipeline.store.ports.webhooks import WebhookStore
from pipeline.webhooks import signing
from schemas.webhooks import EVENT_KINDS, WebhookSubscription

MAX_SECRETS = 2   # the new one and the one being rotated out


def check_url(url: str) -> str:
    """An absolute http(s) URL with a host: where deliveries go."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInput("url", f"expected an absolute http:// or https:// URL with a host, got {url[:80]!r}")
    if parts.username or parts.password:
        raise InvalidInput("url", "credentials in the URL would be stored and logged; the signature authenticates")
    return url


def check_events(events: Iterable[str]) -> list[str]:
    chosen = list(dict.fromkeys(events))
    unknown = [e for e in chosen if e not in EVENT_KINDS]
    if not chosen or unknown:
        raise InvalidInput("events", f"choose one or more of {', '.join(EVENT_KINDS)}"
                           + (f" (unknown: {', '.join(unknown)})" if unknown else ""))
    return chosen


def subscribe(webhooks: WebhookStore, agent_id: str, url: str, events: Iterable[str], now: datetime, *,
              include_content: bool = False) -> WebhookSubscription:
    """A new subscription with a new secret (in the returned subscription: show it once)."""
    sub = WebhookSubscription(subscription_id="whsub_" + uuid.uuid4().hex[:20], agent_id=agent_id,
                              url=check_url(url), events=check_events(events), include_content=include_content,
                              secrets=[signing.new_secret()], created_at=now, updated_at=now)
    webhooks.put_subscription(sub)
    return sub


def owned(webhooks: WebhookStore, subscription_id: str, agent_id: str | None) -> WebhookSubscription | None:
    """The subscription, if it is the agent's (any agent's: None); None otherwise, the same
    answer for another agent's as for none, so ids are not probed."""
    sub = webhooks.get_subscription(subscription_id)
    if sub is None or (agent_id is not None and sub.agent_id != agent_id):
        return None
    return sub


def rotate(webhooks: WebhookStore, sub: WebhookSubscription, now: datetime, *, drop_old: bool = False) -> WebhookSubscription:
    """Sign with a new secret; the previous one keeps signing beside it until ``drop_old``
    (a receiver switches when it likes, verifying either meanwhile)."""
    secrets = [signing.new_secret()] + ([] if drop_old else sub.secrets[:MAX_SECRETS - 1])
    sub = sub.model_copy(update={"secrets": secrets, "updated_at": now})
    webhooks.put_subscription(sub)
    return sub


def enable(webhooks: WebhookStore, sub: WebhookSubscription, now: datetime) -> WebhookSubscription:
    sub = sub.model_copy(update={"enabled": True, "consecutive_failures": 0, "disabled_reason": None,
                                 "updated_at": now})
    webhooks.put_subscription(sub)
    return sub
