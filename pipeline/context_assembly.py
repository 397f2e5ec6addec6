"""The memory context of one agent, assembled from its store (design §6).

What each visible scope holds (its blob and recent reflections), the recent facts, and the
session's cache of the block. The rules are pure and live beside it: what a conversation may
see, the rendering and when a cached block is stale in ``pipeline.context``, the token budget
in ``pipeline.packing``. ``MemoryService.get_memory_context`` checks its arguments, reads the
visibility once and hands it here.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import cached_property

from pipeline import context, tracing, validity
from pipeline.errors import InvalidInput
from pipeline.packing import default_max_tokens, pack
from pipeline.search.filters import MemoryFilter
from schemas.hits import SearchHit
from pipeline.store.port import Store
from schemas.context import ContextBlock
from schemas.documents import CachedContext, Fact
from schemas.settings import Settings


class ContextAssembly:
    """Builds the ``<MemoryContext>`` of one agent from its store, and serves it from the
    session's cache while nothing it shows has moved."""

    def __init__(self, store: Store, settings: Settings, agent_id: str) -> None:
        self.store = store
        self.settings = settings
        self.agent_id = agent_id

    @cached_property
    def default_budget(self) -> int:
        """``MEMORY_CONTEXT_MAX_TOKENS``, or the budget derived from the limits (rendered once:
        the settings do not change)."""
        configured = self.settings.context_max_tokens
        return default_max_tokens(self.settings) if configured is None else configured

    def budget(self, max_tokens: int | None) -> int:
        """``max_tokens`` (None: the default budget); ``InvalidInput`` unless it is a positive
        whole number."""
        budget = self.default_budget if max_tokens is None else max_tokens
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise InvalidInput("max_tokens", f"expected a positive whole number of tokens, got {max_tokens!r}")
        return budget

    def cached(
        self, view: context.Visibility, *, session_id: str, user_id: str | None, now: datetime, budget: int,
        force_refresh: bool = False,
    ) -> ContextBlock:
        """The context at ``now``, served from the session's cache while it is younger than
        the TTL, no version stamp of a scope it shows has moved and it was built for the same
        view and budget; otherwise (or with ``force_refresh``) built and cached again."""
        keys = sorted(set(view.context_scope_keys) | set(view.fact_scope_keys))
        versions = context.cache_versions(view, self.store.leases.get_scope_versions(self.agent_id, keys), budget)
        if not force_refresh:
            cached = self.store.contexts.get_cached_context(session_id, user_id or "")
            if cached is not None and cached.content is not None and cached.agent_id == self.agent_id and context.is_fresh(
                cached, versions, now, self.settings.context_cache_ttl_s
            ) and (cached.stale_at is None or now < cached.stale_at):  # an expiry moves no stamp
                tracing.set_attributes({"memory.cached": True, "memory.max_tokens": budget})
                return cached.content
        facts = self._live_facts(view, now)
        block = pack(self._scopes(view, None), self._fact_lines(facts, ()), now, budget, [])  # as ``build``
        tracing.set_attributes({"memory.cached": False, "memory.max_tokens": budget})
        expiries = [f.expires_at for f in facts if f.expires_at is not None]
        self.store.contexts.put_cached_context(CachedContext(
            session_id=session_id, user_id=user_id or "", agent_id=self.agent_id, content=block,
            built_at=now, versions=versions, stale_at=min(expiries, default=None),
        ))
        return block

    def build(
        self, view: context.Visibility, now: datetime, budget: int, *, as_of: datetime | None = None,
        relevant: Sequence[SearchHit] = (), where: MemoryFilter | None = None,
    ) -> ContextBlock:
        """The context at ``now``; with ``as_of`` (then ``now`` is ``as_of``) as it stood then
        (``pipeline.validity``). ``relevant`` (what a search for the current message found,
        best first) is shown before the recent facts, and not again among them. ``where``
        narrows the recent facts to those it matches (``relevant`` comes filtered)."""
        found = [context.FactLine(hit.scope, hit.content, hit.aged_from) for hit in relevant]
        recent = self._recent_facts(view, now, as_of, found, where)
        return pack(self._scopes(view, as_of), recent, now, budget, found)

    def _scopes(self, view: context.Visibility, as_of: datetime | None) -> list[context.ScopeMemory]:
        """Each shown scope's blob and newest buffered reflections (as they stood at ``as_of``)."""
        scopes = []
        for key in view.context_scope_keys:
            blob = self.store.blobs.get_blob(self.agent_id, key)
            if as_of is None:
                consolidated = blob.consolidated_content if blob else ""
                buffered = self.store.reflections.unabsorbed_reflections(self.agent_id, key)
            else:
                consolidated, buffered = validity.memory_as_of(
                    blob, self.store.reflections.list_reflections(self.agent_id, key), as_of)
            scopes.append(context.ScopeMemory(
                key, consolidated, [r.content for r in buffered[-context.MAX_RECENT_REFLECTIONS:]],
            ))
        return scopes

    def _recent_facts(
        self, view: context.Visibility, now: datetime, as_of: datetime | None, shown: Sequence[context.FactLine],
        where: MemoryFilter | None = None,
    ) -> list[context.FactLine]:
        """The ``<Facts>`` lines: the newest changes within the FIFO window and limit (of
        those ``where`` matches), less those already ``shown``."""
        if as_of is None:
            return self._fact_lines(self._live_facts(view, now, where), shown)
        if not view.show_facts:
            return []
        since, limit = context.fifo_since(self.settings, now), self.settings.facts_fifo_limit
        # every fact changed since the window opened may have had a version valid then;
        # a version is aged from when it became valid, its recording may come later
        # (a history replayed or imported today)
        changed = self.store.facts.recent_facts(self.agent_id, view.fact_scope_keys, since, None, include_retired=True)
        if where:  # an audit path: the labels as they are now (they keep no history), read here
            changed = [f for f in changed if where.matches(f.labels)]
        valid = sorted(validity.valid_at(changed, as_of), key=lambda v: v.valid_from, reverse=True)
        lines = [context.FactLine(v.fact.scope, v.content, v.valid_from) for v in valid if v.valid_from >= since]
        return _unshown(lines[:limit], shown)

    def _live_facts(self, view: context.Visibility, now: datetime, where: MemoryFilter | None = None) -> list[Fact]:
        """The live facts of the ``<Facts>`` window at ``now`` (those ``where`` matches, found
        through the store's label index), less those expired by then (stamped by beat or not yet)."""
        if not view.show_facts:
            return []
        since, limit = context.fifo_since(self.settings, now), self.settings.facts_fifo_limit
        having = where.groups() if where else ()
        return validity.newest_unexpired(lambda n: self.store.facts.recent_facts(
            self.agent_id, view.fact_scope_keys, since, n, having=having), now, limit)

    @staticmethod
    def _fact_lines(facts: Sequence[Fact], shown: Sequence[context.FactLine]) -> list[context.FactLine]:
        return _unshown([context.FactLine(f.scope, f.content, f.changed_at) for f in facts], shown)


def _unshown(lines: Sequence[context.FactLine], shown: Sequence[context.FactLine]) -> list[context.FactLine]:
    seen = {(f.scope, f.content) for f in shown}
    return [line for line in lines if (line.scope, line.content) not in seen]
