"""Webhooks' use cases (design §13): announce what happened, send one delivery, send again.

- ``announce`` queues one delivery per (subscription, event) for the agent's enabled
  subscriptions to the event's kind; the delivery id comes from both, so a rerun queues
  nothing twice.
- ``attempt`` claims a due delivery (one sender at a time), builds its body (content only
  for a subscription that opted in, read now and screened: what an erasure removed meanwhile
  is not there to send), signs it with every current secret, sends it, and records what
  followed (``delivery.after``). A delivery withdrawn by an erasure meanwhile stays withdrawn.
- ``redeliver`` puts failed (or delivered) deliveries back in the queue, due now.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from pipeline.formation.secrets import SecretGuard
from pipeline.store.port import BlobStore, FactStore, IngestStore, WebhookStore
from pipeline.webhooks import delivery as rules
from pipeline.webhooks import events, signing
from pipeline.webhooks.sender import WebhookSender
from pipeline.formation.outputs import DecideFactsOutput, Merged
from schemas.access import subject_digest
from schemas.documents import ConsolidatedBlob, Fact, FormationRun
from schemas.webhooks import WebhookDelivery, WebhookEvent

CLAIM_S = 60   # how long a claimed delivery is held from other senders: past the send's timeout


class OutboxStore(Protocol):
    """Deliveries, and the facts and blobs whose content an opted-in delivery carries."""

    webhooks: WebhookStore
    facts: FactStore
    blobs: BlobStore


def delivery_id(subscription_id: str, event_id: str) -> str:
    return "msg_" + hashlib.sha256(f"{subscription_id}\x00{event_id}".encode()).hexdigest()[:32]


def announce(webhooks: WebhookStore, events: Sequence[WebhookEvent], now: datetime) -> list[str]:
    """Queue the events for their agents' subscribers; the ids of the deliveries to send."""
    queued: list[WebhookDelivery] = []
    subscribers: dict[str, list] = {}
    for event in events:
        if event.agent_id not in subscribers:
            subscribers[event.agent_id] = [s for s in webhooks.list_subscriptions(event.agent_id) if s.enabled]
        queued += [WebhookDelivery(delivery_id=delivery_id(s.subscription_id, event.event_id),
                                   subscription_id=s.subscription_id, agent_id=event.agent_id, event=event,
                                   next_attempt_at=now, created_at=now)
                   for s in subscribers[event.agent_id] if event.kind in s.events]
    if queued:   # most agents subscribe to nothing: a person's edit then writes nothing more
        webhooks.add_deliveries(queued)
    return [d.delivery_id for d in queued]


@dataclass(frozen=True)
class Attempted:
    """How an attempt ended: ``outcome`` delivered | retry | failed | skipped (not due, taken
    by another sender, or withdrawn), and when to try again for a retry."""

    outcome: str
    retry_at: datetime | None = None
    detail: str = ""


def attempt(store: OutboxStore, sender: WebhookSender, guard: SecretGuard, delivery_id_: str, now: datetime, *,
            schedule: list[float], disable_after: int, wall: Callable[[], float] = time.time) -> Attempted:
    """One attempt of a due delivery (see the module docstring). ``webhook-timestamp`` is the
    wall clock's (``wall``): receivers refuse one far from their own time (replay protection),
    whatever clock schedules the attempts."""
    claimed = store.webhooks.claim_delivery(delivery_id_, now, now + timedelta(seconds=CLAIM_S))
    if claimed is None:
        return Attempted("skipped", detail="not due, taken by another sender, or withdrawn")
    sub = store.webhooks.get_subscription(claimed.subscription_id)
    if sub is None or not sub.enabled:
        reason = "subscription deleted" if sub is None else f"subscription disabled: {sub.disabled_reason}"
        store.webhooks.save_delivery(claimed.model_copy(update={"status": "failed", "last_error": reason}))
        return Attempted("failed", detail=reason)
    content, withheld = _content(store, guard, claimed.event) if sub.include_content else (None, None)
    payload = rules.body(claimed, content, withheld)
    answer = sender.post(sub.url, payload, signing.headers(sub.secrets, claimed.delivery_id, int(wall()), payload))
    after = rules.after(claimed, sub, answer, now, schedule, disable_after)
    if not store.webhooks.save_delivery(_scrubbed(after.delivery)):   # withdrawn by an erasure while it was sent
        return Attempted("skipped", detail="withdrawn")
    store.webhooks.put_subscription(after.subscription)
    if answer.delivered:
        return Attempted("delivered")
    outcome = "retry" if after.retry_at is not None else "failed"
    return Attempted(outcome, after.retry_at, rules.describe(answer))


def _content(store: OutboxStore, guard: SecretGuard, event: WebhookEvent) -> tuple[str | None, str | None]:
    """The text the event is about, as stored now, if it passes the screen."""
    kind, _, ref = (event.content_ref or "").partition(":")
    text = None
    if kind == "fact":
        found = store.facts.get_facts([ref])
        text = found[0].content if found else None
    elif kind == "blob":
        blob = store.blobs.get_blob(event.agent_id, ref)
        text = blob.consolidated_content if blob else None
    if text is None:
        return None, "gone" if kind else None
    if guard.kind(text) is not None:
        return None, "screened"
    return text, None


def _scrubbed(d: WebhookDelivery) -> WebhookDelivery:
    """A sent ``user.forgotten`` notice keeps no id of the person it was about."""
    if d.event.kind != "user.forgotten" or d.status != "delivered":
        return d
    return d.model_copy(update={"event": d.event.model_copy(update={"data": {"user_id": None}})})


def redeliver(webhooks: WebhookStore, delivery_ids: Sequence[str], now: datetime) -> list[str]:
    """Queue the deliveries again, due now, with a fresh schedule; the ids that were found."""
    found = []
    for d_id in delivery_ids:
        d = webhooks.get_delivery(d_id)
        if d is not None and webhooks.save_delivery(d.model_copy(update={
                "status": "pending", "attempts": 0, "next_attempt_at": now, "last_error": None})):
            found.append(d_id)
    return found


class RunReads(Protocol):
    """What announcing a run reads: its agent's subscriptions and the facts it touched."""

    webhooks: WebhookStore
    facts: FactStore


def run_events(store: RunReads, run: FormationRun, decided: DecideFactsOutput | None, merged: Sequence[Merged],
               now: datetime) -> list[WebhookEvent]:
    """What a finished run announces: its fact changes as stored (``events.fact_events``)
    and each blob it merged. Nothing is read when the agent has no subscription."""
    if not store.webhooks.list_subscriptions(run.agent_id):
        return []
    facts = store.facts.get_facts(events.touched_fact_ids(run, decided.effects if decided else []))
    blobs = [events.consolidated_event(run.agent_id, m.scope_key, m.version, _scope_user(m.scope_key), now,
                                       run.run_id) for m in merged]
    return [*events.fact_events(run, facts, now), *blobs]


def _scope_user(scope_key: str) -> str | None:
    """The user of a ``user:<user>`` scope key (``schemas.documents.scope_key``)."""
    kind, _, rest = scope_key.partition(":")
    return rest if kind == "user" else None


def blob_events(webhooks: WebhookStore, agent_id: str, merged: Sequence[Merged], now: datetime) -> list[WebhookEvent]:
    """What merges outside a run (a session's end) announce."""
    if not merged or not webhooks.list_subscriptions(agent_id):
        return []
    return [events.consolidated_event(agent_id, m.scope_key, m.version, _scope_user(m.scope_key), now)
            for m in merged]


class FailureReads(Protocol):
    """What announcing a failed run reads: the subscriptions, and the session's people."""

    webhooks: WebhookStore
    ingest: IngestStore


def announce_changed(webhooks: WebhookStore, facts: Sequence[Fact], kind: str, source: str, now: datetime, *,
                     reason: str | None = None, also: Iterable[str] = ()) -> list[str]:
    """What a person (``source`` owner or user) or an import did to ``facts``, as stored after
    it (a deleted fact: as it was), announced as a run announces the same change: the same kind
    and ``data``, ``source`` in place of the run's ids (``events.changed_fact_event``)."""
    if not facts:
        return []
    change = f"{source}:{uuid.uuid4().hex}"
    return announce(webhooks, [events.changed_fact_event(f, kind, source, change, now, reason=reason, also=also)
                               for f in facts], now)


def announce_blob(webhooks: WebhookStore, blob: ConsolidatedBlob, source: str, now: datetime) -> list[str]:
    """A blob version a person or an import wrote (``memory.consolidated``, as a merge's)."""
    return announce(webhooks, [events.consolidated_event(blob.agent_id, blob.scope_key, blob.version, blob.user_id,
                                                         now, source=source)], now)


def announce_run_failed(store: FailureReads, run: FormationRun, now: datetime) -> list[str]:
    """A run that ended failed or dead, to the agent's subscribers."""
    if not store.webhooks.list_subscriptions(run.agent_id):
        return []
    session = store.ingest.get_session(run.session_id)
    return announce(store.webhooks, [events.run_failed_event(run, session.users if session else [], now)], now)


def announce_forgotten(webhooks: WebhookStore, user_id: str, agent_ids: Iterable[str], now: datetime) -> list[str]:
    """After an erasure: withdraw every delivery about the person (under those agents), then
    tell each agent's subscribers, with the platform's own id for them."""
    # the erasure's id names a digest of the person, never their id: it outlives the notice
    erasure = f"{subject_digest(None, user_id)}@{now.isoformat()}"
    return announce(webhooks, [events.user_forgotten_event(a, user_id, erasure, now) for a in sorted(set(agent_ids))],
                    now)
