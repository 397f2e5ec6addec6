"""The store port (design §7): repository methods, with no query dicts leaking into the domain.

The store is composed, not inherited: it holds one repository per narrow port
(``pipeline.store.ports``) as an attribute, ``store.facts.add_facts(...)``,
``store.runs.try_claim(...)``, and keeps only its lifecycle (``create_indexes``, ``close``).
Two adapters implement it, the ``sqlite`` package (the embedded default) and the ``mongo``
package (production), each with one repository module per port, and one contract test suite
(``tests/pipeline/store/``) runs unchanged against both. Every method documented as *atomic*
must stay correct when many processes (SQLite) or threads (Mongo) race on it.

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

#: the store's repositories: attribute name -> the narrow port it implements
REPOSITORIES: dict[str, type] = {
    "ingest": IngestStore, "runs": RunStore, "facts": FactStore, "reflections": ReflectionStore,
    "blobs": BlobStore, "leases": LeaseStore, "contexts": ContextStore, "admin": AdminStore,
    "provenance": ProvenanceStore, "access": AccessStore, "stats": StatsStore, "webhooks": WebhookStore,
    "rollups": RollupStore, "caps": CapStore,
}


class SessionStore(Protocol):
    """Sessions with their messages, and the runs that claim them: what ingest, the trigger
    and the sweep use together."""

    ingest: IngestStore
    runs: RunStore


class Store(Protocol):
    """Every collection of §7, one repository per narrow port, for wiring. A caller that needs
    some parts only takes those repositories (``facts: FactStore``), or names them in a small
    protocol of attributes (``class Reads(Protocol): facts: FactStore; leases: LeaseStore``)."""

    ingest: IngestStore
    runs: RunStore
    facts: FactStore
    reflections: ReflectionStore
    blobs: BlobStore
    leases: LeaseStore
    contexts: ContextStore
    admin: AdminStore
    provenance: ProvenanceStore
    access: AccessStore
    stats: StatsStore
    webhooks: WebhookStore
    rollups: RollupStore
    caps: CapStore

    def create_indexes(self) -> list[str]:
        """Create every index (unique keys included), idempotently. Returns their names."""
        ...

    def close(self) -> None:
        """Let go of the connections; the store is not used after."""
        ...


__all__ = [
    "AccessStore", "AdminStore", "BlobStore", "CapStore", "ContextStore", "CostRow", "FactCandidate", "FactStore", "FactUpdate",
    "IngestOutcome", "IngestStore", "LeaseStore", "ProvenanceStore", "REPOSITORIES", "ReflectionCounts",
    "ReflectionStore", "RollupStore", "RunStore", "SessionStore", "StatsStore", "Store", "WebhookStore", "owned_by_another",
]
