"""Migration from the previous memory system's collections (design §9).

Mapping, per source document:
- ``memory_sessions`` ``directive`` -> a user reflection for each of its ``related_users``;
  ``suggestion`` -> an agent reflection. Each is unabsorbed only if its id is listed in its
  parent's ``unabsorbed_memory_ids`` (``memory_user`` of that agent and user for directives,
  ``memory_agent`` shards of that agent for suggestions); otherwise it is migrated absorbed.
- ``fact`` -> an agent fact, embedded; the ``facts`` of active ``memory_agent`` shards too.
- ``episode`` -> dropped.
- ``memory_user.content`` -> the user's consolidated blob.
- the ``content`` of active ``memory_agent`` shards, as ``[SHARD NAME]`` sections under
  ``VERSION: 1`` -> the agent's consolidated blob.

Dry run by default (counts only); ``apply=True`` writes. Idempotent: every new id is derived
from the old ``_id`` (``v1:<_id>``) and blobs are written only where none exists. The source is
only ever read (``find``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from pipeline.embeddings.port import Embedder
from pipeline.store.port import Store
from pipeline.text import text_hash
from schemas.documents import ConsolidatedBlob, Fact, Reflection, scope_key
from schemas.settings import Settings

EMBED_BATCH = 64


@dataclass(frozen=True)
class SourceCollections:
    sessions: str = "memory_sessions"
    users: str = "memory_user"
    agents: str = "memory_agent"


@dataclass
class MigrationPlan:
    """Everything the source maps to, before anything is written."""

    user_reflections: list[Reflection] = field(default_factory=list)
    agent_reflections: list[Reflection] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    user_blobs: list[ConsolidatedBlob] = field(default_factory=list)
    agent_blobs: list[ConsolidatedBlob] = field(default_factory=list)
    episodes_dropped: int = 0
    skipped: Counter = field(default_factory=Counter)  # reason -> count

    def counts(self) -> dict[str, int]:
        return {
            "directives -> user reflections": len(self.user_reflections),
            "directives -> user reflections, unabsorbed": sum(not r.absorbed for r in self.user_reflections),
            "suggestions -> agent reflections": len(self.agent_reflections),
            "suggestions -> agent reflections, unabsorbed": sum(not r.absorbed for r in self.agent_reflections),
            "facts -> agent facts": len(self.facts),
            "memory_user -> user blobs": len(self.user_blobs),
            "memory_agent shards -> agent blobs": len(self.agent_blobs),
            "episodes -> dropped": self.episodes_dropped,
            **{f"skipped: {reason}": n for reason, n in sorted(self.skipped.items())},
        }


def _id(doc: Mapping[str, Any]) -> str:
    return str(doc["_id"])


def _formed_at(doc: Mapping[str, Any], now: datetime) -> datetime:
    for key in ("created_at", "createdAt", "updated_at"):
        value = doc.get(key)
        if isinstance(value, datetime):
            return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    generation_time = getattr(doc.get("_id"), "generation_time", None)  # bson ObjectId
    return generation_time if isinstance(generation_time, datetime) else now


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _shard_fact_texts(shard: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(key, text) of each fact a shard carries: plain strings or {content|text|fact} documents."""
    for i, item in enumerate(shard.get("facts") or []):
        if isinstance(item, Mapping):
            text = _text(item.get("content") or item.get("text") or item.get("fact"))
            key = str(item.get("_id") or item.get("id") or i)
        else:
            text, key = _text(item), str(i)
        if text:
            yield key, text


def plan_migration(
    sessions: Iterable[Mapping[str, Any]],
    users: Iterable[Mapping[str, Any]],
    agents: Iterable[Mapping[str, Any]],
    settings: Settings,
    now: datetime,
) -> MigrationPlan:
    """Pure mapping of the three source collections (already read) to the new documents."""
    plan = MigrationPlan()
    users = list(users)
    agents = sorted(agents, key=lambda d: (str(d.get("agent_id")), _id(d)))
    user_unabsorbed: dict[tuple[str, str], set[str]] = defaultdict(set)
    for doc in users:
        user_unabsorbed[(str(doc.get("agent_id")), str(doc.get("user_id")))].update(
            str(x) for x in doc.get("unabsorbed_memory_ids") or []
        )
    agent_unabsorbed: dict[str, set[str]] = defaultdict(set)
    for doc in agents:
        agent_unabsorbed[str(doc.get("agent_id"))].update(str(x) for x in doc.get("unabsorbed_memory_ids") or [])

    for doc in sessions:
        kind, text, agent_id = doc.get("memory_type"), _text(doc.get("content")), doc.get("agent_id")
        if kind == "episode":
            plan.episodes_dropped += 1
            continue
        if not agent_id or not text:
            plan.skipped["no agent_id or empty content"] += 1
            continue
        agent_id, old_id = str(agent_id), _id(doc)
        formed_at = _formed_at(doc, now)
        session_id = str(doc["source_session_id"]) if doc.get("source_session_id") else None
        if kind == "directive":
            related = [str(u) for u in doc.get("related_users") or []]
            if not related:
                plan.skipped["directives without related_users"] += 1
            for user_id in related:
                absorbed = old_id not in user_unabsorbed[(agent_id, user_id)]
                plan.user_reflections.append(Reflection(
                    reflection_id=f"v1:{old_id}" if len(related) == 1 else f"v1:{old_id}:{user_id}",
                    agent_id=agent_id, scope="user", user_id=user_id,
                    scope_key=scope_key("user", user_id=user_id), content=text,
                    source_session_id=session_id, formed_at=formed_at,
                    absorbed=absorbed, absorbed_at=now if absorbed else None,
                ))
        elif kind == "suggestion":
            absorbed = old_id not in agent_unabsorbed[agent_id]
            plan.agent_reflections.append(Reflection(
                reflection_id=f"v1:{old_id}", agent_id=agent_id, scope="agent", scope_key="agent",
                content=text, source_session_id=session_id, formed_at=formed_at,
                absorbed=absorbed, absorbed_at=now if absorbed else None,
            ))
        elif kind == "fact":
            plan.facts.append(_fact(f"v1:{old_id}", agent_id, text, formed_at, session_id,
                                    [str(m) for m in doc.get("source_message_ids") or []]))
        else:
            plan.skipped[f"unknown memory_type {kind!r}"] += 1

    for doc in users:
        text, agent_id, user_id = _text(doc.get("content")), doc.get("agent_id"), doc.get("user_id")
        if not (text and agent_id and user_id):
            plan.skipped["memory_user without content, agent_id or user_id"] += 1
            continue
        plan.user_blobs.append(ConsolidatedBlob(
            agent_id=str(agent_id), scope="user", scope_key=scope_key("user", user_id=str(user_id)),
            user_id=str(user_id), consolidated_content=text, word_limit=settings.word_limit("user"),
            version=1, last_consolidated_at=_formed_at(doc, now),
        ))

    sections: dict[str, list[str]] = defaultdict(list)
    for shard in agents:
        agent_id = str(shard.get("agent_id"))
        if not shard.get("is_active"):
            plan.skipped["inactive memory_agent shards"] += 1
            continue
        text = _text(shard.get("content"))
        if text:
            sections[agent_id].append(f"[{shard.get('shard_name') or 'GENERAL'}]\n{text}")
        for key, fact_text in _shard_fact_texts(shard):
            plan.facts.append(_fact(f"v1:{_id(shard)}:{key}", agent_id, fact_text, _formed_at(shard, now), None, []))
    for agent_id, parts in sections.items():
        plan.agent_blobs.append(ConsolidatedBlob(
            agent_id=agent_id, scope="agent", scope_key="agent",
            consolidated_content="VERSION: 1\n\n" + "\n\n".join(parts),
            word_limit=settings.word_limit("agent"), version=1, last_consolidated_at=now,
        ))
    return plan


def _fact(fact_id, agent_id, text, formed_at, session_id, message_ids) -> Fact:
    return Fact(
        fact_id=fact_id, agent_id=agent_id, scope="agent", scope_key="agent", content=text,
        hash=text_hash(text), source_session_id=session_id, source_message_ids=message_ids,
        formed_at=formed_at,
    )


def apply_plan(plan: MigrationPlan, store: Store, embedder: Embedder) -> dict[str, int]:
    """Write the plan. Returns what was written and what was already there (a rerun writes 0)."""
    written: Counter = Counter()
    reflections = plan.user_reflections + plan.agent_reflections
    new = store.insert_reflections(reflections)
    written["reflections written"] = new
    written["reflections already present"] = len(reflections) - new

    existing = {f.fact_id for f in store.get_facts([f.fact_id for f in plan.facts])}
    todo = [f for f in plan.facts if f.fact_id not in existing]
    written["facts already present"] = len(existing)
    for start in range(0, len(todo), EMBED_BATCH):
        batch = todo[start:start + EMBED_BATCH]
        vectors = embedder.embed([f.content for f in batch])
        for fact, vector in zip(batch, vectors.vectors):
            inserted, _ = store.insert_fact(
                fact.model_copy(update={"embedding": vector, "embedding_model": vectors.model})
            )
            written["facts written" if inserted else "facts already present (same text)"] += 1

    for blob in plan.user_blobs + plan.agent_blobs:
        saved = store.save_blob(blob, expected_version=0)
        written[f"{blob.scope} blobs {'written' if saved else 'already present'}"] += 1
    return dict(written)


def read_source(db: Any, collections: SourceCollections) -> tuple[list, list, list]:
    """Read the three collections of a pymongo ``Database`` (find only: never written)."""
    return (
        list(db[collections.sessions].find({})),
        list(db[collections.users].find({})),
        list(db[collections.agents].find({})),
    )


def migrate(
    db: Any, store: Store | None, embedder: Embedder | None, settings: Settings, now: datetime,
    *, collections: SourceCollections = SourceCollections(), apply: bool = False,
) -> tuple[dict[str, int], dict[str, int] | None]:
    """Plan (and with ``apply``, write) the migration: (plan counts, written counts or None)."""
    plan = plan_migration(*read_source(db, collections), settings=settings, now=now)
    if not apply:
        return plan.counts(), None
    if store is None or embedder is None:
        raise ValueError("migrate(apply=True) needs a target store and an embedder")
    return plan.counts(), apply_plan(plan, store, embedder)
