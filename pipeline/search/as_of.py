"""``search_facts`` as of a past time (design §11 "Time"): the same branches, thresholds and
fusion, over the fact versions valid then instead of the live index.

The live index holds the current text of live facts only. A search ``as_of`` reads every fact
of the scope keys, retired ones included, keeps the version valid then
(``pipeline.validity``) and searches those with a ``LocalFactSearch`` built for this one call:
a current text keeps its stored vector; a replaced text, whose vector is not kept, is embedded
again (its content alone, in one batched call; without the embedder it is found by text only).
It reads the scope keys whole: an audit path, not the agent's per-turn search.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

from pipeline import tracing
from pipeline.embeddings.port import Embedder
from pipeline.errors import TransientError
from pipeline.search.local import LocalFactSearch
from pipeline.store.port import FactCandidate, FactStore
from pipeline.validity import FactVersion, version_at

log = logging.getLogger("memory.search")


class _ValidThen:
    """What a ``LocalFactSearch`` reads from its store, holding only the versions of one time."""

    def __init__(self, candidates: dict[str, list[FactCandidate]], model: str, labels: dict[str, list[str]]) -> None:
        self._candidates = candidates
        self._model = model
        self._labels = labels
        # the two repositories a ``SegmentSource`` has: this one object answers for both
        self.facts = self.leases = self

    def search_candidates(self, agent_id: str, scope_keys: Sequence[str], embedding_model: str | None):
        out = []
        for key in scope_keys:
            for c in self._candidates.get(key, ()):
                vector = c.embedding if embedding_model is not None and embedding_model == self._model else None
                out.append(FactCandidate(c.fact_id, c.scope, c.user_id, c.content, vector, c.formed_at))
        return out

    def labelled_fact_ids(self, agent_id: str, scope_keys: Sequence[str], having: Sequence[Sequence[str]]) -> set[str]:
        # a fact's labels as they are now: categories and metadata keep no history
        return {c.fact_id for key in scope_keys for c in self._candidates.get(key, ())
                if all(set(self._labels[c.fact_id]).intersection(group) for group in having)}

    def get_scope_versions(self, agent_id: str, scope_keys: Sequence[str]) -> dict[str, int]:
        return {key: 0 for key in scope_keys}

    def stamps_epoch(self) -> int:
        return 0


def search_as_of(
    facts: FactStore, embedder: Embedder | None, agent_id: str, scope_keys: Sequence[str], when: datetime,
) -> tuple[LocalFactSearch, dict[str, FactVersion], str | None]:
    """A search over the versions of ``scope_keys`` valid at ``when``, those versions by fact
    id, and why replaced texts could not be embedded (None when they were, or there were none)."""
    shown: dict[str, FactVersion] = {}
    for key in scope_keys:
        for fact in facts.list_facts(agent_id, key, include_retired=True):
            version = version_at(fact, when)
            if version is not None:
                shown[fact.fact_id] = version
    model = embedder.model if embedder is not None else ""
    vectors: dict[str, Sequence[float] | None] = {
        fid: v.fact.embedding if v.current and v.fact.embedding_model == model else None for fid, v in shown.items()
    }
    replaced = [fid for fid, v in shown.items() if not v.current]
    error = None
    if replaced and embedder is not None:
        try:
            vectors.update(zip(replaced, tracing.embed(embedder, [shown[fid].content for fid in replaced], "as_of").vectors))
        except TransientError as exc:
            error = f"{type(exc).__name__}: {exc}"
            log.warning("search_facts as_of: embedding replaced texts failed, text search only for them: %s", error)
    candidates: dict[str, list[FactCandidate]] = {}
    for fid, v in shown.items():
        candidates.setdefault(v.fact.scope_key, []).append(FactCandidate(
            fid, v.fact.scope, v.fact.user_id, v.content, vectors[fid], v.recorded_at,
        ))
    labels = {fid: v.fact.labels for fid, v in shown.items()}
    search = LocalFactSearch(_ValidThen(candidates, model, labels), cache=False)  # type: ignore[arg-type]
    return search, shown, error
