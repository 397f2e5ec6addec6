"""Webhook subscriptions of one agent (design §13 "Operator controls"), under
``/v1/agents/{agent_id}/webhooks``: subscribe, list, rotate the signing secret, switch back on,
delete; and under ``…/webhook-deliveries`` read the delivery log and send deliveries again (a
path of its own: under ``webhooks/`` it would read as a subscription id). A subscription
sends the agent's memory events (and, opted in, its content) to a URL of the caller's choice,
so it takes an owner's key (the ``curate`` scope) or an admin key, never the runtime's."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query

from api.access import require_curator
from api.audit import audit
from api.auth import Principal, caller
from api.errors import NotFound
from api.context import AppContext, app_context
from api.routes_memory import AgentId
from api.strict import known_query_only
from pipeline.webhooks import outbox, subscriptions
from schemas import api as m
from schemas import api_webhooks as w
from schemas.values import Id
from schemas.webhooks import DeliveryStatus, WebhookDelivery, WebhookSubscription

router = APIRouter(prefix="/v1/agents/{agent_id}", tags=["webhooks"], responses=m.ERRORS,
                   dependencies=[Depends(known_query_only)])

SubId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_]+$")]
Caller = Annotated[Principal, Depends(caller)]
Ctx = Annotated[AppContext, Depends(app_context)]


def _curator(caller: Principal, agent_id: str, what: str) -> None:
    require_curator(caller, agent_id, what)


def _owned(ctx: AppContext, subscription_id: str, agent_id: str) -> WebhookSubscription:
    sub = subscriptions.owned(ctx.store, subscription_id, agent_id)
    if sub is None:
        raise NotFound(f"agent {agent_id!r} has no webhook subscription {subscription_id!r}", "path subscription_id")
    return sub


def _out(sub: WebhookSubscription) -> w.SubscriptionOut:
    return w.SubscriptionOut(**sub.model_dump(exclude={"secrets"}), signing_secrets=len(sub.secrets))


def _delivery(d: WebhookDelivery) -> w.DeliveryOut:
    return w.DeliveryOut(**d.model_dump(exclude={"event", "agent_id"}), kind=d.event.kind, event_id=d.event.event_id)


def _audit(ctx: AppContext, caller: Principal, action: str, agent_id: str, subject: str | None = None,
           counts: dict[str, int] | None = None) -> None:
    audit(ctx.store, ctx.clock.now(), caller.credential_id, caller.kind, action, agent_id=agent_id, subject=subject,
          counts=counts)


@router.post("/webhooks", response_model=w.SubscriptionCreated, status_code=201, summary="Subscribe a URL to the agent's events")
def create(agent_id: AgentId, body: w.SubscriptionIn, caller: Caller, ctx: Ctx) -> w.SubscriptionCreated:
    _curator(caller, agent_id, "subscribing to webhooks")
    sub = subscriptions.subscribe(ctx.store, agent_id, body.url, body.events, ctx.clock.now(),
                                  include_content=body.include_content)
    _audit(ctx, caller, "webhook.create", agent_id, sub.subscription_id)
    return w.SubscriptionCreated(**_out(sub).model_dump(), secret=sub.secrets[0])


@router.get("/webhooks", response_model=w.SubscriptionList, summary="The agent's webhook subscriptions")
def list_all(agent_id: AgentId, caller: Caller, ctx: Ctx) -> w.SubscriptionList:
    _curator(caller, agent_id, "reading webhook subscriptions")
    return w.SubscriptionList(subscriptions=[_out(s) for s in ctx.store.webhooks.list_subscriptions(agent_id)])


@router.delete("/webhooks/{subscription_id}", response_model=w.SubscriptionDeleted, summary="Delete a subscription and its log")
def delete(agent_id: AgentId, subscription_id: SubId, caller: Caller, ctx: Ctx) -> w.SubscriptionDeleted:
    _curator(caller, agent_id, "deleting a webhook subscription")
    _owned(ctx, subscription_id, agent_id)
    gone = ctx.store.webhooks.delete_subscription(subscription_id)
    _audit(ctx, caller, "webhook.delete", agent_id, subscription_id)
    return w.SubscriptionDeleted(deleted=subscription_id, deliveries=max(gone - 1, 0))


@router.post("/webhooks/{subscription_id}/rotate", response_model=w.SubscriptionCreated,
             summary="Sign with a new secret (the previous one keeps signing until dropped)")
def rotate(agent_id: AgentId, subscription_id: SubId, body: w.RotateIn, caller: Caller, ctx: Ctx) -> w.SubscriptionCreated:
    _curator(caller, agent_id, "rotating a webhook secret")
    sub = subscriptions.rotate(ctx.store, _owned(ctx, subscription_id, agent_id), ctx.clock.now(),
                               drop_old=body.drop_old)
    _audit(ctx, caller, "webhook.rotate", agent_id, subscription_id)
    return w.SubscriptionCreated(**_out(sub).model_dump(), secret=sub.secrets[0])


@router.post("/webhooks/{subscription_id}/enable", response_model=w.SubscriptionOut,
             summary="Switch a subscription that repeated failures switched off back on")
def enable(agent_id: AgentId, subscription_id: SubId, caller: Caller, ctx: Ctx) -> w.SubscriptionOut:
    _curator(caller, agent_id, "switching a webhook subscription on")
    sub = subscriptions.enable(ctx.store, _owned(ctx, subscription_id, agent_id), ctx.clock.now())
    _audit(ctx, caller, "webhook.enable", agent_id, subscription_id)
    return _out(sub)


@router.get("/webhook-deliveries", response_model=w.DeliveryList, summary="The delivery log, newest first")
def deliveries(agent_id: AgentId, caller: Caller, ctx: Ctx, subscription_id: Id | None = None,
               status: DeliveryStatus | None = None,
               limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> w.DeliveryList:
    _curator(caller, agent_id, "reading the webhook delivery log")
    found = ctx.store.webhooks.list_deliveries(agent_id=agent_id, subscription_id=subscription_id, status=status, limit=limit)
    return w.DeliveryList(deliveries=[_delivery(d) for d in found])


@router.post("/webhook-deliveries/redeliver", response_model=w.Redelivered,
             summary="Queue deliveries again, due now (beat's webhook sweep sends them)")
def redeliver(agent_id: AgentId, body: w.RedeliverIn, caller: Caller, ctx: Ctx) -> w.Redelivered:
    _curator(caller, agent_id, "redelivering webhooks")
    ids = [d.delivery_id for d in (ctx.store.webhooks.get_delivery(i) for i in body.delivery_ids) if d and d.agent_id == agent_id]
    if body.failed:
        ids += [d.delivery_id for d in ctx.store.webhooks.list_deliveries(agent_id=agent_id, status="failed", limit=1000)]
    queued = outbox.redeliver(ctx.store, list(dict.fromkeys(ids)), ctx.clock.now())
    _audit(ctx, caller, "webhook.redeliver", agent_id, counts={"queued": len(queued)})
    return w.Redelivered(queued=queued)
