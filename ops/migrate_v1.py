"""Migration from the previous memory system's collections (design §9), under the guarantees
of design §11: screened, within word limits, with provenance.

What each source document becomes, and how the guarantees hold, is the plan's
(``ops.v1_plan``); this module reads the source and writes the plan.

Dry run by default (counts only); ``apply=True`` writes. Idempotent: every new id is derived
from the old ``_id`` (``v1:<_id>``) and blobs are written only where none exists. The source is
only ever read (``find``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ops.v1_plan import MigrationPlan, plan_migration
from pipeline.embeddings.port import Embedder
from pipeline.store.port import Store
from schemas.settings import Settings

EMBED_BATCH = 64


@dataclass(frozen=True)
class SourceCollections:
    sessions: str = "memory_sessions"
    users: str = "memory_user"
    agents: str = "memory_agent"


def apply_plan(plan: MigrationPlan, store: Store, embedder: Embedder,
               progress: Callable[[int], None] = lambda n: None) -> dict[str, int]:
    """Write the plan, calling ``progress(n)`` as ``n`` more documents are done (of
    ``plan.size()``). Returns what was written and what was already there (a rerun writes 0).

    A blob is written where the store has none. Where the store already holds a blob of that
    scope (memory formed before the migration), the v1 blob's text is not lost: its reflections,
    and those of the records it had absorbed, go in unabsorbed, and the next consolidation
    merges them into the existing blob."""
    written: Counter = Counter()
    merge_later: set[tuple[str, str]] = set()   # scopes whose v1 blob was not written
    for blob in plan.user_blobs + plan.agent_blobs:
        own = set(blob.absorbing_ids)
        if store.blobs.save_blob(blob, expected_version=0):
            written[f"{blob.scope} blobs written"] += 1
        elif own <= {r.reflection_id for r in store.reflections.list_reflections(blob.agent_id, blob.scope_key)}:
            # migrated before (its text may have been merged into a later version since)
            written[f"{blob.scope} blobs already present"] += 1
        else:
            merge_later.add((blob.agent_id, blob.scope_key))
            written[f"{blob.scope} blobs kept; v1 text -> unabsorbed reflection"] += 1
        progress(1)
    # nothing stays absorbed into a blob that was not written: the blob's own text and the
    # records it absorbed in v1 wait in the buffer, and the next consolidation merges them
    reflections = [r.model_copy(update={"absorbed": False, "absorbed_at": None, "consolidated_into": None})
                   if (r.agent_id, r.scope_key) in merge_later and r.absorbed else r
                   for r in plan.reflections()]
    new = store.reflections.insert_reflections(reflections)
    written["reflections written"] = new
    written["reflections already present"] = len(reflections) - new
    progress(len(reflections))

    existing = {f.fact_id for f in store.facts.get_facts([f.fact_id for f in plan.facts])}
    todo = [f for f in plan.facts if f.fact_id not in existing]
    written["facts already present"] = len(existing)
    progress(len(existing))
    for start in range(0, len(todo), EMBED_BATCH):
        batch = todo[start:start + EMBED_BATCH]
        vectors = embedder.embed([f.content for f in batch])
        for fact, vector in zip(batch, vectors.vectors):
            inserted, _ = store.facts.insert_fact(
                fact.model_copy(update={"embedding": vector, "embedding_model": vectors.model})
            )
            written["facts written" if inserted else "facts already present (same text)"] += 1
        progress(len(batch))
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
    progress: Callable[[int, int], None] | None = None,
) -> tuple[dict[str, int], dict[str, int] | None]:
    """Plan (and with ``apply``, write) the migration: (plan counts, written counts or None).
    ``progress(total, n)``: ``n`` more of ``total`` documents written."""
    toggles = (lambda agent_id: store.ingest.get_agent_settings(agent_id).user_memory_enabled) if store is not None \
        else (lambda agent_id: True)
    plan = plan_migration(*read_source(db, collections), settings=settings, now=now, user_memory=toggles)
    if not apply:
        return plan.counts(), None
    if store is None or embedder is None:
        raise ValueError("migrate(apply=True) needs a target store and an embedder")
    total = plan.size()
    return plan.counts(), apply_plan(plan, store, embedder, (lambda n: progress(total, n)) if progress else (lambda n: None))
