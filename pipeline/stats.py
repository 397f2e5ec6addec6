"""Counts per scope for ``get_memory_stats`` and ``get_consolidation_status`` (design §6, §12).

Counts and sums are the store's (``count_facts``, ``reflection_counts``, ``count_unabsorbed``,
and the usage roll-ups, ``rollup_rows``): their cost does not grow with the memory held or the
runs made. Only a scope's unabsorbed
buffer, bounded by its consolidation threshold, is read, for its words.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from pipeline import cost
from pipeline.owner.pauses import is_paused, paused_keys
from pipeline.store.port import BlobStore, FactStore, ReflectionStore, RollupStore, StatsStore
from pipeline.text import word_count
from pipeline.visibility import ViewReads
from schemas.documents import scope_key
from schemas.settings import Settings


class StatusReads(ViewReads, Protocol):
    """What a consolidation status reads beside what is paused: the buffers and the blobs."""

    reflections: ReflectionStore
    blobs: BlobStore


class StatsReads(StatusReads, Protocol):
    """What memory stats read beside a status's: the facts, the counts and the usage roll-ups."""

    facts: FactStore
    stats: StatsStore
    rollups: RollupStore


def _scope_keys(user_id: str | None, session_id: str | None) -> list[tuple[str, str]]:
    """(scope, key) of the agent scope, and of the user's and the session's when given."""
    keys = [("agent", scope_key("agent"))]
    if user_id:
        keys.append(("user", scope_key("user", user_id=user_id)))
    if session_id:
        keys.append(("session", scope_key("session", session_id=session_id)))
    return keys


def _paused(store: ViewReads, agent_id: str, user_id: str | None) -> set[str]:
    """The scope keys nothing new is formed for: what the owner paused (``*`` the whole agent)
    and the user's own scope when they switched their memory off (design §12, §13)."""
    paused = paused_keys(store.ingest.get_agent_settings(agent_id))
    if user_id and store.access.user_memory_off(agent_id, [user_id]):
        paused.add(scope_key("user", user_id=user_id))
    return paused


def memory_stats(store: StatsReads, agent_id: str, *, user_id: str | None, session_id: str | None) -> dict[str, Any]:
    """Per scope: words of its blob, reflection counts, fact counts and timestamps, the
    tokens and cost of the model calls that formed it (``pipeline.cost``), and whether it is
    paused."""
    out: dict[str, Any] = {"agent_id": agent_id, "scopes": {}}
    spend = _spend(store.rollups, agent_id, user_id, session_id)
    keys = _scope_keys(user_id, session_id)
    counts = store.stats.reflection_counts(agent_id, [k for _, k in keys])
    paused = _paused(store, agent_id, user_id)
    for scope, key in keys:
        blob = store.blobs.get_blob(agent_id, key)
        reflections = counts[key]
        unabsorbed = store.reflections.unabsorbed_reflections(agent_id, key) if reflections.unabsorbed else []
        entry: dict[str, Any] = {
            "scope": scope,
            "blob_words": word_count(blob.consolidated_content) if blob else 0,
            "blob_version": blob.version if blob else 0,
            "last_consolidated_at": _iso(blob.last_consolidated_at if blob else None),
            "reflections": reflections.total,
            "reflections_unabsorbed": reflections.unabsorbed,
            "reflection_words_unabsorbed": sum(word_count(r.content) for r in unabsorbed),
            "last_reflection_at": _iso(reflections.last_formed_at),
            "tokens": cost.tokens_of(spend[key]),
            "cost": {"usd": spend[key]["usd"], "unpriced": spend[key]["unpriced"], "text": cost.describe(spend[key])},
            "paused": is_paused(paused, key),
        }
        if scope != "session":
            newest = store.facts.list_facts(agent_id, key, limit=1)
            entry["facts"] = store.facts.count_facts(agent_id, key)
            entry["last_fact_at"] = _iso(newest[0].formed_at if newest else None)
        out["scopes"][key] = entry
    return out


def consolidation_status(
    store: StatusReads, settings: Settings, agent_id: str, *, user_id: str | None, session_id: str | None,
) -> dict[str, Any]:
    """Per scope: buffered reflections against the consolidation threshold, the blob's words
    against its limit, whether a consolidation is due, and whether the scope is paused (then
    nothing is consolidated for it until it is resumed)."""
    keys = _scope_keys(user_id, session_id)
    counts = store.reflections.count_unabsorbed(agent_id, [k for _, k in keys])
    paused = _paused(store, agent_id, user_id)
    out: dict[str, Any] = {"agent_id": agent_id, "scopes": {}}
    for scope, key in keys:
        blob = store.blobs.get_blob(agent_id, key)
        buffered = int(counts.get(key, 0))
        threshold = settings.consolidation_threshold(scope)  # type: ignore[arg-type]
        out["scopes"][key] = {
            "scope": scope, "buffered": buffered, "threshold": threshold, "due": buffered >= threshold,
            "blob_words": word_count(blob.consolidated_content) if blob else 0,
            "word_limit": settings.word_limit(scope),  # type: ignore[arg-type]
            "blob_version": blob.version if blob else 0,
            "paused": is_paused(paused, key),
        }
    return out


def _spend(rollups: RollupStore, agent_id: str, user_id: str | None, session_id: str | None) -> dict[str, dict]:
    """All-time cost per scope key, from the usage roll-ups (``rollup_rows``): a few rows per
    stage and model however many runs the agent made. The agent's every run and usage record
    (session-end consolidations, failed attempts); the user's runs and their records; the
    session's runs and records."""
    out = {scope_key("agent"): _summary(rollups.rollup_rows(agent_id, all_time=True))}
    if user_id:
        out[scope_key("user", user_id=user_id)] = _summary(rollups.rollup_rows(agent_id, user_id=user_id, all_time=True))
    if session_id:
        out[scope_key("session", session_id=session_id)] = _summary(
            rollups.rollup_rows(agent_id, session_id=session_id, all_time=True))
    return out


def _summary(rows) -> dict:
    """``pipeline.cost.summary`` of the store's summed rows."""
    return cost.summary(row.by_model() for row in rows)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None
