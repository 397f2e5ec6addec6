"""Dedup candidates of decide_facts (design §5.3): which stored facts, and which earlier new
facts of the same run, a new fact is compared with. Pure, apart from the search port it is
given; ``pipeline.formation.dedup`` decides what to do with them.

Candidates compare content with content. Stored facts carry their retrieval-text vector
(content + provenance excerpt + date, for search), which a bare-content query does not
match reliably across sessions, so candidates come in two steps:
``shortlist``: per new fact, in parallel, through the search port with the pre-filter of
every search (same agent, same scope key, ``user:<id>`` covering "same user"; same
embedding model, which the stage also checks on text-branch hits), the union of the semantic
branch queried with the fact's content vector and the text branch (BM25 on the fact's
content), each with no threshold and ``SHORTLIST_FACTOR`` x the candidate limit;
``with_recent``: plus the same scope key's facts of the same model formed in the last
``MEMORY_DEDUP_RECENT_WINDOW_S``, read by an ordinary store query: a search index may be
eventually consistent (Atlas), so facts formed seconds ago may be missing from both branches;
``score_candidates``: the semantic score (1 + cos) / 2 between the new fact's content
vector and each shortlisted fact's content vector (the stage embeds all shortlisted
contents in one batched call and stores the scores before any effect); candidates are
those >= the dedup threshold, at most N per fact, best first.
``same_run_candidates``: the run's own earlier new facts of the same scope key are
candidates too, by the same content rule (two near-duplicates said in one conversation
would otherwise both be added, as neither is stored yet).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.formation.facts import NewFact
from pipeline.search.port import FactSearch
from pipeline.search.scoring import semantic_score
from pipeline.threads import shared_pool


@dataclass(frozen=True)
class Candidate:
    fact_id: str
    content: str
    score: float


#: shortlist size per search branch, as a multiple of the candidate limit
SHORTLIST_FACTOR = 4
#: threads searching shortlists in parallel, shared by every decide_facts of a process
SHORTLIST_THREADS = 8


def shortlist(
    search: FactSearch,
    agent_id: str,
    facts: Sequence[NewFact],
    vectors: Mapping[int, Sequence[float]],
    embedding_model: str,
    *,
    limit: int,
) -> dict[int, list[str]]:
    """Per new fact index, the fact ids of the semantic branch (content vector) then those of
    the text branch (content), without duplicates, no threshold, at most ``limit`` each."""

    def one(fact: NewFact) -> list[str]:
        keys = [fact.scope_key]
        hits = search.semantic(agent_id, keys, embedding_model, vectors[fact.index], limit, None)
        hits += search.text(agent_id, keys, fact.text, limit, None)
        return list(dict.fromkeys(h.fact_id for h in hits))

    if len(facts) > 1:
        # one pool for the process: threads made per call each opened a store connection
        pool = shared_pool("dedup-shortlist", SHORTLIST_THREADS)
        return dict(zip((f.index for f in facts), pool.map(one, facts)))
    return {f.index: one(f) for f in facts}


def with_recent(
    shortlists: Mapping[int, Sequence[str]], facts: Sequence[NewFact], recent: Mapping[str, Sequence[str]],
) -> dict[int, list[str]]:
    """Each fact's shortlist followed by its scope key's recently formed facts (``recent``,
    read from the store, not the search index, which may lag behind recent writes), without
    duplicates."""
    return {f.index: list(dict.fromkeys([*shortlists.get(f.index, ()), *recent.get(f.scope_key, ())]))
            for f in facts}


def score_candidates(
    facts: Sequence[NewFact],
    shortlists: Mapping[int, Sequence[str]],
    vectors: Mapping[int, Sequence[float]],
    candidate_vectors: Mapping[str, Sequence[float]],
    *,
    min_score: float,
    limit: int,
) -> dict[int, list[tuple[str, float]]]:
    """Per new fact index, (fact id, semantic score of content vs content) of the shortlisted
    facts that have a content vector, score >= ``min_score``, at most ``limit``, best first
    (ties by shortlist order)."""
    out: dict[int, list[tuple[str, float]]] = {}
    for fact in facts:
        query = _unit(vectors[fact.index])
        scored = []
        for rank, fid in enumerate(shortlists.get(fact.index, ())):
            if fid not in candidate_vectors or query is None:
                continue
            other = _unit(candidate_vectors[fid])
            if other is None or other.shape != query.shape:
                continue
            score = float(semantic_score(float(query @ other)))
            if score >= min_score:
                scored.append((-score, rank, fid, score))
        out[fact.index] = [(fid, score) for _, _, fid, score in sorted(scored)[:limit]]
    return out


def same_run_candidates(
    run_id: str,
    facts: Sequence[NewFact],
    vectors: Mapping[int, Sequence[float]],
    *,
    min_score: float,
) -> dict[int, list[tuple[str, float]]]:
    """Per new fact index, the run's earlier new facts of the same scope key whose content
    score against it is >= ``min_score``, as (the id the earlier fact gets when added, score)."""
    out: dict[int, list[tuple[str, float]]] = {}
    units = {f.index: _unit(vectors[f.index]) for f in facts}
    for later_pos, later in enumerate(facts):
        query = units[later.index]
        for earlier in facts[:later_pos]:
            other = units[earlier.index]
            if earlier.scope_key != later.scope_key or query is None or other is None or other.shape != query.shape:
                continue
            score = float(semantic_score(float(query @ other)))
            if score >= min_score:
                out.setdefault(later.index, []).append((new_fact_id(run_id, earlier.index), score))
    return out


def merge_candidates(
    stored: Mapping[int, Sequence[tuple[str, float]]], same_run: Mapping[int, Sequence[tuple[str, float]]],
    *, limit: int,
) -> dict[int, list[tuple[str, float]]]:
    """Stored and same-run candidates of each fact, best first (stored first on a tie), at most
    ``limit``."""
    out: dict[int, list[tuple[str, float]]] = {}
    for index in dict.fromkeys([*stored, *same_run]):
        ranked = [(-score, 0, n, fid, score) for n, (fid, score) in enumerate(stored.get(index, ()))]
        ranked += [(-score, 1, n, fid, score) for n, (fid, score) in enumerate(same_run.get(index, ()))]
        out[index] = [(fid, score) for *_, fid, score in sorted(ranked)[:limit]]
    return out


def _unit(vector: Sequence[float]) -> np.ndarray | None:
    v = np.asarray(vector, dtype=np.float64)
    norm = float(np.linalg.norm(v))
    return v / norm if norm else None


def candidates_from(
    scored: Mapping[int, Sequence[Sequence]], contents: Mapping[str, str],
) -> dict[int, list[Candidate]]:
    """``score_candidates``' (id, score) pairs (as stored on the run) with the live contents;
    a fact retired since it was scored is no candidate."""
    return {
        int(index): [Candidate(fid, contents[fid], float(score)) for fid, score in pairs if fid in contents]
        for index, pairs in scored.items()
    }


def new_fact_id(run_id: str, index: int) -> str:
    """The id the run's new fact ``index`` gets when added: the same on every replay."""
    return f"{run_id}:{index}"
