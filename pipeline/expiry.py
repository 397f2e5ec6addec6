"""Expiry (design §13 "Expiry"): beat stamps the facts whose ``expires_at`` has passed.

Reads never wait for this: a fact is out of every read once its expiry is at or before the
read's time (``validity.expired``), stamped or not. The stamp makes it retired in the store,
with the reason ``expired`` and ``valid_to`` its expiry (its history kept), so that the
listings that count live facts, the hash that holds its text and the caches keyed by scope
stamps agree with the reads; and it announces ``fact.retired`` (reason ``expired``) to the
agent's webhook subscribers, with an event id per fact, so a rerun queues nothing twice.

Safe to run twice at once: each retirement is conditional on the fact being live.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from pipeline import validity
from pipeline.store.port import FactStore, LeaseStore, WebhookStore
from pipeline.webhooks import events, outbox
from schemas.documents import Fact

#: who retired an expired fact (``Fact.retired_by``): no run did
RETIRED_BY = "expiry"
REASON = "expired"
#: a bound on batches per call, so that one task always ends
MAX_BATCHES = 100


class ExpiryStore(Protocol):
    """The facts, their scopes' version stamps and the webhook outbox."""

    facts: FactStore
    leases: LeaseStore
    webhooks: WebhookStore


@dataclass
class ExpiryResult:
    retired: list[str] = field(default_factory=list)       # fact ids stamped by this call
    deliveries: list[str] = field(default_factory=list)    # webhook deliveries queued


def stamp_expired(store: ExpiryStore, now: datetime, batch: int) -> ExpiryResult:
    """Retire every live fact whose ``expires_at`` is at or before ``now``, ``batch`` at a
    time, bump the stamps of the scopes it changed and announce each retirement."""
    result = ExpiryResult()
    for _ in range(MAX_BATCHES):
        ids = store.facts.expired_fact_ids(now, batch)
        done = stamp(store, store.facts.get_facts(ids), now)
        result.retired += done.retired
        result.deliveries += done.deliveries
        if len(ids) < batch:
            break
    return result


def stamp(store: ExpiryStore, facts: Sequence[Fact], now: datetime) -> ExpiryResult:
    """Retire those of ``facts`` expired by ``now`` and still live (reason ``expired``, valid
    until their expiry), bump their scopes' stamps and announce each: what beat does, and
    what formation does at once to an expired fact that holds the text it is about to store."""
    stamped = [f for f in facts if validity.expired(f, now) and f.expires_at is not None and store.facts.retire_fact(
        f.fact_id, now, RETIRED_BY, valid_to=f.expires_at, expected_version=f.version, reason=REASON)]
    by_agent: dict[str, set[str]] = {}
    for fact in stamped:
        by_agent.setdefault(fact.agent_id, set()).add(fact.scope_key)
    for agent_id, keys in sorted(by_agent.items()):
        store.leases.bump_scope_versions(agent_id, sorted(keys))
    retired = store.facts.get_facts(f.fact_id for f in stamped)
    deliveries = outbox.announce(store.webhooks, [events.expired_event(f, now) for f in retired], now) if retired else []
    return ExpiryResult([f.fact_id for f in retired], deliveries)
