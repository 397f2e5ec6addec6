"""The store port (design §7): repository methods, with no query dicts leaking into the domain.

Two adapters implement it, ``sqlite.py`` (the embedded default) and ``mongo.py`` (production),
and one contract test suite (``tests/pipeline/store/test_contract.py``) runs unchanged against
both. Every method documented as *atomic* must stay correct when many processes (SQLite) or
threads (Mongo) race on it.

Conventions:
- every "now" is passed in by the caller (the clock port), never read inside the store;
- every query carries ``agent_id``;
- methods that apply an effect of a formation run are idempotent on the run id, so a stage
  rerun after a crash applies nothing twice;
- methods that change a run raise ``KeyError`` for an unknown run id (``renew_run_lease``
  returns False and ``reopen_run`` None instead).
"""

from __future__ import annotations

from pipeline.store.port_access import AccessStore
from pipeline.store.port_admin import AdminStore
from pipeline.store.port_ingest import IngestOutcome, IngestStore, owned_by_another
from pipeline.store.port_memory import FactCandidate, MemoryStore
from pipeline.store.port_runs import RunStore
from pipeline.store.port_stats import CostRow, ReflectionCounts, StatsStore


class Store(IngestStore, RunStore, MemoryStore, AdminStore, AccessStore, StatsStore):
    """Repository methods for every collection of §7: the union of the five ports, for wiring.
    A caller that needs one part only takes that port."""


__all__ = [
    "AccessStore", "AdminStore", "CostRow", "FactCandidate", "IngestOutcome", "IngestStore",
    "MemoryStore", "ReflectionCounts", "RunStore", "StatsStore", "Store", "owned_by_another",
]
