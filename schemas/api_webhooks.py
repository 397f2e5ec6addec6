"""HTTP shapes of webhooks (``/v1/agents/{agent_id}/webhooks``, ``…/webhook-deliveries``): subscriptions without their
secrets (a secret is shown once, when made or rotated) and the delivery log."""

from __future__ import annotations

from datetime import datetime

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from schemas.values import Id, TextChars
from schemas.webhooks import DeliveryStatus, EventKind


class SubscriptionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: Annotated[str, TextChars] = Field(min_length=1, max_length=2048,
                                           description="an absolute http(s) URL; no credentials in it")
    events: list[EventKind] = Field(min_length=1, max_length=16)
    include_content: StrictBool = Field(default=False, description="send the fact's or blob's text, screened, when sent")


class SubscriptionOut(BaseModel):
    subscription_id: str
    agent_id: str
    url: str
    events: list[EventKind]
    include_content: bool
    enabled: bool
    disabled_reason: str | None
    consecutive_failures: int
    signing_secrets: int = Field(description="how many secrets sign each delivery (2 during a rotation)")
    created_at: datetime
    updated_at: datetime


class SubscriptionCreated(SubscriptionOut):
    secret: str = Field(description="the signing secret (whsec_...), shown only now")


class SubscriptionList(BaseModel):
    subscriptions: list[SubscriptionOut]


class SubscriptionDeleted(BaseModel):
    deleted: str
    deliveries: int = Field(description="log entries deleted with it")


class RotateIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    drop_old: StrictBool = Field(default=False, description="stop signing with the previous secret now")


class DeliveryOut(BaseModel):
    delivery_id: str = Field(description="the webhook-id header: the same on every attempt")
    subscription_id: str
    kind: EventKind
    event_id: str
    status: DeliveryStatus
    attempts: int
    next_attempt_at: datetime
    last_status: int | None
    last_error: str | None
    delivered_at: datetime | None
    created_at: datetime


class DeliveryList(BaseModel):
    deliveries: list[DeliveryOut]


class RedeliverIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    delivery_ids: list[Id] = Field(default_factory=list, max_length=1000)
    failed: StrictBool = Field(default=False, description="also every failed delivery of the agent (up to 1000)")


class Redelivered(BaseModel):
    queued: list[str]
