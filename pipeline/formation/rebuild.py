"""Rebuilding a consolidated blob after erasure removed reflections it absorbed (design §11).

The blob's text mixes every reflection it absorbed, so it cannot be edited: it is merged again,
from nothing, out of the absorbed reflections that remain (they are kept after absorption),
through the LLM port with the usual word limit and length retries
(``consolidation.merge_within_limit``). The erasure holds the consolidation leases of every
scope key it changes (``holding``), so that no merge runs meanwhile; the new version is saved
by compare-and-set and names the reflections it absorbed. Which blobs:
``pipeline.erasure.Plan.rebuild``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from pipeline.erasure import Rebuild
from pipeline.errors import TransientError
from pipeline.formation import consolidation as rules
from pipeline.formation.consolidate_stages import ScopeBusy
from pipeline.formation.runner import Deps, Usage, record_spend
from pipeline.formation.screening import Screened, guard_for, screen_blob
from pipeline.llm.models import tier_model
from pipeline.prompts.consolidation import build_consolidation_request
from schemas.documents import Stage

#: the stage name of a rebuild's usage record
REBUILD_BLOB = Stage.REBUILD_BLOB
#: how long an erasure waits for a consolidation of the same scope key to end
LEASE_WAIT_S = 30.0


@contextmanager
def holding(deps: Deps, keys: Iterable[tuple[str, str]], holder: str) -> Iterator[None]:
    """Hold the consolidation lease of every ``(agent id, scope key)``: no merge of those keys
    runs meanwhile (one that tries is retried later, and then no longer sees what was
    removed). Raises ``ScopeBusy`` when a consolidation keeps one past ``LEASE_WAIT_S``."""
    store, lease_s = deps.store, deps.settings.consolidation_lease_s
    names = [f"consolidate:{agent_id}:{key}" for agent_id, key in sorted(set(keys))]
    held: list[str] = []
    try:
        for name in names:
            deadline = time.monotonic() + LEASE_WAIT_S
            while not store.leases.acquire_lease(name, holder, deps.clock.now(), lease_s):
                if time.monotonic() > deadline:
                    raise ScopeBusy(f"a consolidation holds {name}; run forget-user again later", retry_after=1.0)
                time.sleep(0.2)
            held.append(name)
        yield
    finally:
        for name in held:
            store.leases.release_lease(name, holder)


def rebuild_blob(deps: Deps, target: Rebuild, holder: str) -> dict:
    """Merge ``target``'s blob again from its ``keep_ids`` reflections alone. The caller holds
    the scope key's consolidation lease (``holding``), so they are still what the plan read."""
    store, settings = deps.store, deps.settings
    agent_id, key = target.agent_id, target.scope_key
    blob = store.blobs.get_blob(agent_id, key)
    wanted = set(target.keep_ids)
    keep = [r for r in store.reflections.list_reflections(agent_id, key) if r.reflection_id in wanted]
    if blob is None or not keep:
        return {"scope_key": key, "status": "nothing_to_rebuild"}
    scope = rules.scope_of_key(key)
    limit = settings.word_limit(scope)  # type: ignore[arg-type]
    texts = [r.content for r in keep]
    usage = Usage()
    try:
        merge = rules.merge_within_limit(
            deps.llm,
            lambda excess, missing: build_consolidation_request(
                scope, "", texts, word_limit=limit, model=tier_model(settings, 0),
                excess_words=excess, missing_sections=missing,
            ),
            version=blob.version + 1, word_limit=limit, max_length_retries=settings.consolidation_max_length_retries,
            usage=usage,
        )
    finally:  # the rebuild's calls are paid for like any other (memoryctl cost, stage "rebuild_blob")
        record_spend(deps, usage, agent_id=agent_id, stage=REBUILD_BLOB)
    now = deps.clock.now()
    ids = [r.reflection_id for r in keep]
    screened = Screened()   # a rebuild is a write like any other (design §11)
    content = screen_blob(merge.content, scope, guard=guard_for(settings), counts=screened,
                          people=[u for r in keep for u in (*r.source_user_ids, r.user_id) if u])
    rebuilt = blob.model_copy(update={
        "consolidated_content": content, "word_limit": limit, "version": blob.version + 1,
        "last_consolidated_at": now, "absorbing_ids": ids, "last_run_id": holder,
    })
    if not store.blobs.save_blob(rebuilt, expected_version=blob.version):
        raise TransientError(f"blob {agent_id}/{key} moved past version {blob.version} during the rebuild")
    store.reflections.mark_absorbed(ids, blob.version + 1, now)
    store.leases.bump_scope_versions(agent_id, [key])
    return {"scope_key": key, "status": "rebuilt", "version": blob.version + 1, "absorbed": len(ids),
            "words": merge.words, "attempts": merge.attempts, **screened.counts()}
