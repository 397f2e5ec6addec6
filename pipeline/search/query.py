"""What one ``search_facts`` call is asked (``FactQuery``) and what it reads with
(``SearchClients``): the call's parameters grouped by kind, typed, instead of fifteen keywords
(``pipeline.retrieval.search_facts``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from pipeline.clock import Clock
from pipeline.embeddings.port import Embedder
from pipeline.search.port import FactSearch
from pipeline.store.port import AccessStore, FactStore, IngestStore
from schemas.settings import Settings

if TYPE_CHECKING:  # both import this module's neighbours: only their names are needed here
    from pipeline.context import Visibility
    from pipeline.retrieval import Thresholds
    from pipeline.search.filters import MemoryFilter


class SearchReads(Protocol):
    """What a search reads beside the search index: the facts it returns (and their access
    counts), the agent's settings and session, and the users who switched their memory off."""

    facts: FactStore
    ingest: IngestStore
    access: AccessStore


@dataclass(frozen=True)
class SearchClients:
    """The store, index, embedder, settings and clock a search runs with (a service's own)."""

    store: SearchReads
    search: FactSearch
    embedder: Embedder | None
    settings: Settings
    clock: Clock


@dataclass(frozen=True)
class FactQuery:
    """One search: who asks (agent, session, user), for what (1 to 3 queries), how many
    results, and how.

    ``debug`` adds every stage's timings and scores; ``as_of`` searches the facts as they were
    valid then (no access is recorded); ``track_access`` False records none either (a context
    searching for its ``<RelevantFacts>``); ``thresholds`` overrides the production ones
    (benchmarks only); ``view`` is what this conversation may see when the caller already read
    it for this call, else it is read by the search; ``where`` narrows the facts searched to
    some categories and metadata values (``pipeline.search.filters``), inside each branch."""

    agent_id: str
    session_id: str
    user_id: str | None
    query: str | Sequence[str]
    top_k: int = 10
    debug: bool = False
    as_of: datetime | None = None
    track_access: bool = True
    thresholds: Thresholds | None = None
    view: Visibility | None = None
    where: MemoryFilter | None = None
