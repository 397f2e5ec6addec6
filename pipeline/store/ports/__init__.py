"""One narrow port per aggregate of the store (design §7). ``pipeline.store.port.Store`` is
their composition, for wiring; a caller names the ports it uses.

Each port is a ``typing.Protocol`` whose methods are abstract: an adapter's repository
subclasses its port, and cannot be built while it misses a method (as with an ABC), while a
function that needs a few aggregates names them in a small composed protocol (``class
Reads(FactStore, LeaseStore, Protocol)``), which the whole store satisfies."""

from __future__ import annotations

from pipeline.store.ports.access import AccessStore
from pipeline.store.ports.admin import AdminStore
from pipeline.store.ports.blobs import BlobStore
from pipeline.store.ports.contexts import ContextStore
from pipeline.store.ports.facts import FactCandidate, FactStore, FactUpdate
from pipeline.store.ports.ingest import IngestOutcome, IngestStore, owned_by_another
from pipeline.store.ports.leases import LeaseStore
from pipeline.store.ports.provenance import ProvenanceStore
from pipeline.store.ports.reflections import ReflectionStore
from pipeline.store.ports.rollups import RollupStore
from pipeline.store.ports.runs import RunStore
from pipeline.store.ports.stats import CostRow, ReflectionCounts, StatsStore

__all__ = [
    "AccessStore", "AdminStore", "BlobStore", "ContextStore", "CostRow", "FactCandidate", "FactStore", "FactUpdate",
    "IngestOutcome", "IngestStore", "LeaseStore", "ProvenanceStore", "ReflectionCounts", "ReflectionStore",
    "RollupStore", "RunStore", "StatsStore", "owned_by_another",
]
