"""Webhook subscriptions of one agent (design §13 "Operator controls"), under
``/v1/agents/{agent_id}/webhooks``: subscribe, list, rotate the signing secret, switch back on,
delete; and under ``…/webhook-deliveries`` read the delivery log and send deliveries again (a
path of its own: under ``webhooks/`` it would read as a subscription id). A subscription
sends the agent's memory events (and, opted in, its content) to a URL of the caller's choice,
so it takes an owner's key (the ``curate`` scope) or an admin key, never the runtime's."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query

from api.audit import audited
from api.auth import Principal, caller
from api.errors import NotFound
from api.permissions import curator
from api.context import AppContext, app_context
from api.routes_memory import AgentId
from api.strict import known_query_only
from schemas import api as m
from schemas import api_webhooks as w
from schemas.values import Id
from schemas.webhooks import DeliveryStatus, WebhookDelivery, WebhookSubscription
from usecases import webhooks

router = APIRouter(prefix="/v1/agents/{agent_id}", tags=["webhooks"], responses=m.ERRORS,
                   dependencies=[Depends(known_query_only)])

SubId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_]+$")]
Caller = Annotated[Principal, Depends(caller)]
Ctx = Annotated[AppContext, Depends(app_context)]


def _owned(ctx: AppContext, subscription_id: str, agent_id: str) -> WebhookSubscription:
    sub = webhooks.owned(ctx.store.webhooks, subscription_id, agent_id)
    if sub is None:
        raise NotFound(f"agent {agent_id!r} has no webhook subscription {subscription_id!r}", "path subscription_id")
    return sub


def _out(sub: WebhookSubscription) -> w.SubscriptionOut:
    return w.SubscriptionOut(**sub.model_dump(exclude={"secrets"}), signing_secrets=len(sub.secrets))


def _delivery(d: WebhookDelivery) -> w.DeliveryOut:
    return w.DeliveryOut(**d.model_dump(exclude={"event", "agent_id"}), kind=d.event.kind, event_id=d.event.event_id)


@router.post("/webhooks", response_model=w.SubscriptionCreated, status_code=201,
             summary="Subscribe a URL to the agent's events", dependencies=[curator("subscribing to webhooks")])
def create(agent_id: AgentId, body: w.SubscriptionIn, caller: Caller, ctx: Ctx) -> w.SubscriptionCreated:
    sub = audited(ctx, caller, webhooks.subscribe(ctx.store.webhooks, agent_id, body.url, body.events, ctx.clock.now(),
                                                  include_content=body.include_content)).subscription
    return w.SubscriptionCreated(**_out(sub).model_dump(), secret=sub.secrets[0])


@router.get("/webhooks", response_model=w.SubscriptionList, summary="The agent's webhook subscriptions",
            dependencies=[curator("reading webhook subscriptions")])
def list_all(agent_id: AgentId, caller: Caller, ctx: Ctx) -> w.SubscriptionList:
    return w.SubscriptionList(subscriptions=[_out(s) for s in webhooks.listed(ctx.store.webhooks, agent_id)])


@router.delete("/webhooks/{subscription_id}", response_model=w.SubscriptionDeleted,
               summary="Delete a subscription and its log", dependencies=[curator("deleting a webhook subscription")])
def delete(agent_id: AgentId, subscription_id: SubId, caller: Caller, ctx: Ctx) -> w.SubscriptionDeleted:
    gone = audited(ctx, caller, webhooks.remove(ctx.store.webhooks, _owned(ctx, subscription_id, agent_id)))
    return w.SubscriptionDeleted(deleted=subscription_id, deliveries=gone.deliveries)


@router.post("/webhooks/{subscription_id}/rotate", response_model=w.SubscriptionCreated,
             summary="Sign with a new secret (the previous one keeps signing until dropped)",
             dependencies=[curator("rotating a webhook secret")])
def rotate(agent_id: AgentId, subscription_id: SubId, body: w.RotateIn, caller: Caller, ctx: Ctx) -> w.SubscriptionCreated:
    sub = audited(ctx, caller, webhooks.rotate(ctx.store.webhooks, _owned(ctx, subscription_id, agent_id),
                                               ctx.clock.now(), drop_old=body.drop_old)).subscription
    return w.SubscriptionCreated(**_out(sub).model_dump(), secret=sub.secrets[0])


@router.post("/webhooks/{subscription_id}/enable", response_model=w.SubscriptionOut,
             summary="Switch a subscription that repeated failures switched off back on",
             dependencies=[curator("switching a webhook subscription on")])
def enable(agent_id: AgentId, subscription_id: SubId, caller: Caller, ctx: Ctx) -> w.SubscriptionOut:
    sub = audited(ctx, caller, webhooks.enable(ctx.store.webhooks, _owned(ctx, subscription_id, agent_id),
                                               ctx.clock.now())).subscription
    return _out(sub)


@router.get("/webhook-deliveries", response_model=w.DeliveryList, summary="The delivery log, newest first",
            dependencies=[curator("reading the webhook delivery log")])
def deliveries(agent_id: AgentId, caller: Caller, ctx: Ctx, subscription_id: Id | None = None,
               status: DeliveryStatus | None = None,
               limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> w.DeliveryList:
    found = webhooks.deliveries(ctx.store.webhooks, agent_id=agent_id, subscription_id=subscription_id, status=status,
                                limit=limit)
    return w.DeliveryList(deliveries=[_delivery(d) for d in found])


@router.post("/webhook-deliveries/redeliver", response_model=w.Redelivered,
             summary="Queue deliveries again, due now (beat's webhook sweep sends them)",
             dependencies=[curator("redelivering webhooks")])
def redeliver(agent_id: AgentId, body: w.RedeliverIn, caller: Caller, ctx: Ctx) -> w.Redelivered:
    done = audited(ctx, caller, webhooks.redeliver(ctx.store.webhooks, body.delivery_ids, ctx.clock.now(),
                                                   agent_id=agent_id, failed_of=agent_id if body.failed else None))
    return w.Redelivered(queued=done.queued)
