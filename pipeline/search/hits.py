"""What ``search_facts`` finds (design §6), typed from ``pipeline.retrieval`` to every door.

The hits are ``schemas.hits.SearchHit``, the very model the HTTP API answers with, built here
from the facts (``live_hits``) or their versions (``version_hit``); only the in-process
facade's documented dict form is written here, by ``documented``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from pipeline import context
from pipeline.search import scoring
from pipeline.search.filters import MemoryFilter
from pipeline.store.port import FactStore
from pipeline.validity import FactVersion, expired
from schemas.hits import SearchHit


class Found(BaseModel):
    """A ``search_facts`` answer: the hits best first, and with ``debug`` every stage's
    timings, thresholds and per-branch scores."""

    model_config = ConfigDict(frozen=True)

    hits: list[SearchHit]
    debug: dict[str, Any] | None = None

    def documented(self) -> list[dict[str, Any]] | dict[str, Any]:
        """The documented shape: the list of results, or ``{"results": [...], "debug": {...}}``
        when debug output was asked for."""
        results = [hit.as_result() for hit in self.hits]
        return results if self.debug is None else {"results": results, "debug": self.debug}


def live_hits(
    facts: FactStore, merged: Sequence[scoring.Fused], agent_id: str, scope_keys: Sequence[str], now: datetime,
    where: MemoryFilter | None = None,
) -> list[SearchHit]:
    """The hits of ``merged`` as the facts stand now, best first (and matching ``where``, which
    the search already applied: a fact re-filed since is not shown)."""
    found = {f.fact_id: f for f in facts.get_facts([m.fact_id for m in merged])} if merged else {}
    hits = []
    for item in merged:
        fact = found.get(item.fact_id)
        # defence in depth: a stale index never shows a retired, erased or foreign fact; and
        # an expired one is out now, whether beat has stamped it (moving the stamps) or not
        if fact is None or fact.retired_at is not None or fact.agent_id != agent_id or fact.scope_key not in scope_keys:
            continue
        if expired(fact, now) or (where and not where.matches(fact.labels)):
            continue
        hits.append(SearchHit(
            id=fact.fact_id, content=fact.content, scope=fact.scope, formed_at=fact.formed_at,
            updated_at=fact.changed_at, age=context.format_age(fact.changed_at, now), score=round(item.score, 6),
            expires_at=fact.expires_at, categories=fact.categories, metadata=fact.metadata,
        ))
    return hits


def version_hit(version: FactVersion, score: float, as_of: datetime) -> SearchHit:
    """The hit of a fact's version valid at ``as_of``."""
    fact = version.fact
    return SearchHit(
        id=fact.fact_id, content=version.content, scope=fact.scope, formed_at=fact.formed_at,
        updated_at=version.recorded_at, valid_from=version.valid_from, valid_to=version.valid_to,
        # aged from when the text became valid: it may have been recorded after as_of (a replay)
        age=context.format_age(version.valid_from, as_of), score=round(score, 6), expires_at=fact.expires_at,
        categories=fact.categories, metadata=fact.metadata,
    )
