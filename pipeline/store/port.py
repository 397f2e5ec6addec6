"""The store port (design §7): repository methods, with no query dicts leaking into the domain.

Two adapters implement it, the ``sqlite`` package (the embedded default) and the ``mongo``
package (production), each with one repository module per port (``pipeline.store.ports``),
and one contract test suite (``tests/pipeline/store/``) runs unchanged against both. Every
method documented as *atomic* must stay correct when many processes (SQLite) or threads
(Mongo) race on it.

Conventions:
- every "now" is passed in by the caller (the clock port), never read inside the store;
- every query carries ``agent_id``;
- methods that apply an effect of a formation run are idempotent on the run id, so a stage
  rerun after a crash applies nothing twice;
- methods that change a run raise ``KeyError`` for an unknown run id (``renew_run_lease``
  returns False and ``reopen_run`` None instead).
"""

from __future__ import annotations

from typing import Protocol

from pipeline.store.ports import (
    AccessStore, AdminStore, BlobStore, ContextStore, CostRow, FactCandidate, FactStore, FactUpdate, IngestOutcome,
    IngestStore, LeaseStore, ProvenanceStore, ReflectionCounts, ReflectionStore, RollupStore, RunStore, StatsStore,
    owned_by_another,
)
from pipeline.store.ports.caps import CapStore
from pipeline.store.ports.webhooks import WebhookStore


class SessionStore(IngestStore, RunStore, Protocol):
    """Sessions with their messages, and the runs that claim them: what ingest, the trigger
    and the sweep use together."""


class Store(IngestStore, RunStore, FactStore, ReflectionStore, BlobStore, LeaseStore, ContextStore, AdminStore,
            ProvenanceStore, AccessStore, StatsStore, WebhookStore, RollupStore, CapStore):
    """Repository methods for every collection of §7: the union of the narrow ports
    (``pipeline.store.ports``), for wiring. A caller that needs some parts only names those."""


__all__ = [
    "AccessStore", "AdminStore", "BlobStore", "CapStore", "ContextStore", "CostRow", "FactCandidate", "FactStore", "FactUpdate",
    "IngestOutcome", "IngestStore", "LeaseStore", "ProvenanceStore", "ReflectionCounts",
    "ReflectionStore", "RollupStore", "RunStore", "SessionStore", "StatsStore", "Store", "WebhookStore", "owned_by_another",
]
