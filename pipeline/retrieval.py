"""``search_facts``: the agent's hybrid fact search (design §6).

1 to 3 queries run in parallel. Each runs a semantic and a text branch, both pre-filtered to
the scope keys this (agent, user, session) may see, each cut by its production threshold,
then fused by weighted RRF (1-based ranks, k from settings) and cut in ranks: a fact found by
one signal alone passes down to ``rrf_rank``, whatever the k; then to ``top_k``. The
queries' lists are merged by fact id, best first. Only the facts returned count as accessed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from pipeline import context, tracing
from pipeline.clock import Clock
from pipeline.embeddings.port import Embedder
from pipeline.errors import InvalidInput, TransientError
from pipeline.search import scoring
from pipeline.search.defaults import model_defaults
from pipeline.search.as_of import search_as_of
from pipeline.search.models import check_one_model
from pipeline.search.hits import FactHit, Found
from pipeline.search.port import FactSearch, Hit
from pipeline.store.port import AccessStore, FactStore, IngestStore
from pipeline.threads import shared_pool
from pipeline.validity import FactVersion, check_as_of, expired
from pipeline.visibility import read_visibility
from schemas.settings import Settings
from schemas.values import text_problem

MAX_QUERIES = 3
MAX_TOP_K = 50
#: each branch returns this many candidates per wanted result before fusion
BRANCH_DEPTH = 5
MIN_BRANCH_LIMIT = 50

TOOL_NAME = "search_facts"
log = logging.getLogger("memory.search")


def tool_definition() -> dict[str, Any]:
    """The JSON-schema tool definition served to agents that have memory enabled."""
    return {
        "name": TOOL_NAME,
        "description": (
            "Search your long-term memory of facts about this user and about your own work "
            "(names, numbers, dates, emails, decisions). Use it when the answer may have been "
            "said in an earlier conversation. Give 1 to 3 short queries phrased differently."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {
                    "anyOf": [
                        {"type": "string", "minLength": 1},
                        {"type": "array", "items": {"type": "string", "minLength": 1},
                         "minItems": 1, "maxItems": MAX_QUERIES},
                    ],
                    "description": "One query, or up to 3 alternative phrasings searched in parallel.",
                },
                "top_k": {
                    "type": "integer", "minimum": 1, "maximum": MAX_TOP_K, "default": 10,
                    "description": "Results per query.",
                },
                "debug": {
                    "type": "boolean", "default": False,
                    "description": "Add timings and scores of each stage (for operators).",
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    }


#: provenance (date and excerpt) takes at most this many tokens per token of the fact: the
#: fact stays the main part of its own vector. LoCoMo dev hybrid recall@5/@10: 0.663/0.772
#: at 2, 0.654/0.772 at 3, 0.651/0.772 at 4, 0.656/0.764 with the window as the only limit
PROVENANCE_RATIO = 2


def retrieval_text(
    content: str, *, excerpt: Sequence[str] = (), date: str | None = None, embedder: Embedder | None = None,
) -> str:
    """What to embed for a fact: the fact joined to its provenance, i.e. the date it was said
    and the source excerpt (the messages just before its source message, which it answers).

    A bare fact ("Caroline: I went to the support group yesterday") loses the question it
    answers and its time; joining them back lifted LoCoMo evidence recall@10 of the hybrid
    search from 0.69 to 0.76 (docs/benchmarks.md "Retrieval choices"). The fact's content is unchanged.

    With ``embedder`` the text is budgeted in the model's own tokens: the fact always comes
    whole (it is last, and a model cuts a long text's end); provenance gets what is left of
    the window, at most ``PROVENANCE_RATIO`` times the fact's tokens: the date first, then the
    excerpt lines nearest the fact first, the last one admitted cut to what is left. Three
    long messages before a fact otherwise fill the local model's 256 tokens and its vector
    describes its neighbours, not itself (docs/benchmarks.md "Retrieval choices").
    """
    lines = [line.strip() for line in excerpt if line.strip()]
    head = f"[{date}] " if date else ""
    if embedder is None:
        return head + "".join(f"{line}\n" for line in lines) + content
    count = embedder.count_tokens
    size = count(content)
    left = min(embedder.window - size, PROVENANCE_RATIO * size)
    if left <= 0:
        return content
    if head and count(head) <= left:
        left -= count(head)
    else:
        head = ""
    kept: list[str] = []
    for line in reversed(lines):
        if left <= 0:
            break
        piece = _cut(line, left, count)
        if not piece:
            break
        kept.insert(0, piece)
        left -= count(piece + "\n")
    text = head + "".join(f"{line}\n" for line in kept) + content
    while kept and count(text) > embedder.window:  # token joins differ from the parts' sum
        kept.pop(0)
        text = head + "".join(f"{line}\n" for line in kept) + content
    return text


def _cut(line: str, budget: int, count: Callable[[str], int]) -> str:
    """``line`` if it fits ``budget`` tokens (with its line break), else its longest prefix
    of whole words that does, ending in "…" ("" when not even one word fits)."""
    if count(line + "\n") <= budget:
        return line
    words = line.split(" ")
    lo, hi = 0, len(words) - 1  # the longest fitting prefix has lo..hi words
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(" ".join(words[:mid]) + "…\n") <= budget:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo]) + "…" if lo else ""


@dataclass(frozen=True)
class Thresholds:
    """Scores below these do not count; None switches one off (pure ranking).

    The fused cut is stated in ranks (``rrf_rank``): a fact found by one signal alone (weight
    1) passes down to that rank, and a fact found by both passes unless both ranks are deep,
    judged on the design's k (``scoring.rank_cut_passes``), so the cut means the same for
    every ``rrf_k``. ``rrf``, a raw fused score (``MEMORY_SEARCH_RRF_THRESHOLD``, kept for
    older deployments), replaces it when set."""

    semantic: float | None
    text: float | None
    rrf: float | None
    rrf_k: float
    semantic_weight: float = 1.0
    text_weight: float = 1.0
    rrf_rank: float | None = None

    @classmethod
    def from_settings(cls, settings: Settings, embedding_model: str | None = None) -> "Thresholds":
        """The production thresholds for ``embedding_model`` (see ``resolve``)."""
        return cls.resolve(settings, embedding_model)[0]

    @classmethod
    def resolve(cls, settings: Settings, embedding_model: str | None = None) -> tuple["Thresholds", dict[str, str]]:
        """The production thresholds for ``embedding_model``, and where each value came from:
        the global settings, then the shipped per-model defaults (``pipeline.search.defaults``)
        except where a global value was set explicitly, then
        ``search_by_model[embedding_model]``. Of the two fused cuts, the one set by the most
        specific source acts: a rank set there drops a raw threshold set by a broader one."""
        fields = {
            "semantic": "search_semantic_threshold",
            "text": "search_text_threshold",
            "rrf": "search_rrf_threshold",
            "rrf_k": "search_rrf_k",
            "semantic_weight": "search_semantic_weight",
            "text_weight": "search_text_weight",
            "rrf_rank": "search_rrf_rank",
        }
        values: dict[str, float | None] = {key: getattr(settings, field) for key, field in fields.items()}
        origin = {
            key: f"MEMORY_{field.upper()}" if field in settings.model_fields_set else "global default"
            for key, field in fields.items()
        }
        for key, value in model_defaults(embedding_model).items():
            if fields[key] not in settings.model_fields_set:
                values[key], origin[key] = value, f"shipped default for {embedding_model}"
        overrides = settings.search_by_model.get(embedding_model or "", {})
        where = f"MEMORY_SEARCH_BY_MODEL[{embedding_model}]"
        unknown = set(overrides) - set(values)
        if unknown:
            raise InvalidInput(where, f"unknown keys {sorted(unknown)}; use {sorted(values)}")
        if {"rrf", "rrf_rank"} <= set(overrides):
            raise InvalidInput(where, "give rrf_rank (the same cut for every k) or rrf (a raw fused score), not both")
        if "rrf_rank" in overrides and values["rrf"] is not None:
            values["rrf"], origin["rrf"] = None, f"replaced by {where}['rrf_rank']"
        for key, value in overrides.items():
            values[key], origin[key] = value, where
        if values["rrf"] is not None:  # a raw threshold replaces the rank cut
            values["rrf_rank"], origin["rrf_rank"] = None, f"replaced by {origin['rrf']}"
        return cls(**values), origin

    def off(self) -> "Thresholds":
        return Thresholds(None, None, None, self.rrf_k, self.semantic_weight, self.text_weight)

    def describe(self) -> dict[str, float | None]:
        """Every value (debug output, benchmarks)."""
        return dict(self.__dict__)


def normalize_queries(query: str | Sequence[str]) -> list[str]:
    """1 to 3 non-blank strings (a bare string is one query); duplicates are searched once."""
    queries = [query] if isinstance(query, str) else list(query) if isinstance(query, (list, tuple)) else None
    if queries is None:
        raise InvalidInput("query", f"expected a string or a list of 1 to 3 strings, got {type(query).__name__}")
    if not all(isinstance(q, str) for q in queries):
        raise InvalidInput("query", "every query must be a string")
    for i, q in enumerate(queries):
        if problem := text_problem(q):  # a lone surrogate would fail deep in the embedder
            raise InvalidInput("query" if isinstance(query, str) else f"query[{i}]", problem)
    queries = list(dict.fromkeys(q.strip() for q in queries if q.strip()))
    if not 1 <= len(queries) <= MAX_QUERIES:
        raise InvalidInput("query", f"give 1 to {MAX_QUERIES} non-empty queries, got {len(queries)}")
    return queries


def _check_top_k(top_k: int) -> int:
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
        raise InvalidInput("top_k", f"expected an integer from 1 to {MAX_TOP_K}, got {top_k!r}")
    return top_k


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


def rank_query(
    search: FactSearch, agent_id: str, scope_keys: Sequence[str], embedding_model: str,
    text: str, vector: Sequence[float] | None, top_k: int, limits: Thresholds,
    signals: Sequence[str] = ("semantic", "text"),
) -> tuple[list[scoring.Fused], dict[str, Any]]:
    """One query: its branches (``signals``), thresholds, then RRF; best ``top_k`` first."""
    limit = max(MIN_BRANCH_LIMIT, BRANCH_DEPTH * top_k)
    t0 = time.perf_counter()
    semantic: list[Hit] = []
    if vector is not None and "semantic" in signals:
        semantic = search.semantic(agent_id, scope_keys, embedding_model, vector, limit, limits.semantic)
    t1 = time.perf_counter()
    lexical: list[Hit] = []
    if "text" in signals:
        lexical = search.text(agent_id, scope_keys, text, limit, limits.text)
    t2 = time.perf_counter()
    fused = scoring.rrf(
        {"semantic": [(h.fact_id, h.score) for h in semantic], "text": [(h.fact_id, h.score) for h in lexical]},
        k=limits.rrf_k, weights={"semantic": limits.semantic_weight, "text": limits.text_weight},
        min_score=limits.rrf, depth=limits.rrf_rank,
    )[:top_k]
    info = {
        "query": text,
        "timings_ms": {
            "semantic": round((t1 - t0) * 1000, 3), "text": round((t2 - t1) * 1000, 3), "fuse": _ms(t2),
        },
        "semantic": [{"id": h.fact_id, "score": round(h.score, 6)} for h in semantic[:top_k]],
        "text": [{"id": h.fact_id, "score": round(h.score, 6)} for h in lexical[:top_k]],
        "fused": [{"id": f.fact_id, "score": round(f.score, 6), "ranks": f.ranks} for f in fused],
    }
    return fused, info


class SearchReads(Protocol):
    """What a search reads beside the search index: the facts it returns (and their access
    counts), the agent's settings and session, and the users who switched their memory off."""

    facts: FactStore
    ingest: IngestStore
    access: AccessStore


def search_facts(
    *, store: SearchReads, search: FactSearch, embedder: Embedder | None, settings: Settings, clock: Clock,
    agent_id: str, user_id: str | None, session_id: str, query: str | Sequence[str], top_k: int = 10,
    debug: bool = False, thresholds: Thresholds | None = None, track_access: bool = True,
    as_of: datetime | None = None, view: context.Visibility | None = None,
) -> Found:
    """The facts found, best first (``Found.hits``); each hit's age counts from its latest
    change (``updated_at``). ``Found.documented()`` is the answer in the documented shape.

    With ``debug``, ``Found.debug`` holds every stage's timings and scores. ``thresholds``
    overrides the production ones (benchmarks only). ``view`` is what this conversation may
    see, when the caller already read it for this call; else it is read here
    (``pipeline.visibility``: the group-chat rule over the session's humans as stored). With
    ``as_of`` the facts are searched as they were valid then (``pipeline.search.as_of``): each
    hit shows the text valid then, with its ``valid_from`` and ``valid_to``, aged from
    ``valid_from`` to ``as_of``; no access is recorded.
    """
    start = time.perf_counter()
    queries = normalize_queries(query)
    top_k = _check_top_k(top_k)
    as_of = check_as_of(as_of)
    timings: dict[str, Any] = {}

    t = time.perf_counter()
    if view is None:
        view = read_visibility(store, settings, agent_id, session_id=session_id, user_id=user_id)
    scope_keys = view.fact_scope_keys if view.search_offered else ()
    timings["visibility"] = _ms(t)
    versions: dict[str, FactVersion] = {}
    as_of_error: str | None = None
    if as_of is not None and scope_keys:
        t = time.perf_counter()
        search, versions, as_of_error = search_as_of(store, embedder, agent_id, scope_keys, as_of)
        timings["as_of"] = _ms(t)

    vectors: list[Sequence[float] | None] = [None] * len(queries)
    model = embedder.model if embedder is not None else ""
    embed_error: str | None = None
    if scope_keys and embedder is not None:
        check_one_model(store, agent_id, model)
        t = time.perf_counter()
        try:
            vectors = list(tracing.embed(embedder, queries, "query").vectors)
        except TransientError as exc:
            # the embedding provider is down or slow: answer from the text branch alone
            # rather than failing the agent's tool call
            embed_error = f"{type(exc).__name__}: {exc}"
            log.warning("search_facts: embedding failed, text search only: %s", embed_error)
        timings["embed"] = _ms(t)
    limits = thresholds or Thresholds.from_settings(settings, model)

    t = time.perf_counter()
    per_query: list[tuple[list[scoring.Fused], dict[str, Any]]] = []
    if scope_keys:
        args = [(search, agent_id, scope_keys, model, q, v, top_k, limits) for q, v in zip(queries, vectors)]
        if len(args) == 1:
            per_query = [rank_query(*args[0])]
        else:
            per_query = list(shared_pool("search_facts", MAX_QUERIES).map(lambda a: rank_query(*a), args))
    merged = scoring.merge_best(fused for fused, _ in per_query)
    timings["search"] = _ms(t)

    t = time.perf_counter()
    now = clock.now()
    if as_of is None:
        hits = _live_hits(store, merged, agent_id, scope_keys, now)
    else:
        hits = [_version_hit(versions[m.fact_id], m.score, as_of) for m in merged if m.fact_id in versions]
    timings["fetch"] = _ms(t)

    if track_access and hits and as_of is None:
        t = time.perf_counter()
        store.facts.record_fact_access([hit.id for hit in hits], now)
        timings["access"] = _ms(t)
    timings["total"] = _ms(start)
    tracing.set_attributes({**{f"memory.{k}_ms": v for k, v in timings.items() if isinstance(v, (int, float))},
                            "memory.results": len(hits), "memory.embed_failed": embed_error is not None})
    if not debug:
        return Found(hits=hits)
    return Found(hits=hits, debug={
        "agent_id": agent_id, "scope_keys": list(scope_keys), "group_chat": view.group_chat,
        "offered": view.search_offered, "embedding_model": model, "embed_error": embed_error or as_of_error,
        "as_of": as_of.isoformat() if as_of else None,
        "thresholds": limits.describe(), "timings_ms": timings, "queries": [info for _, info in per_query],
    })


def _live_hits(
    store: FactStore, merged: Sequence[scoring.Fused], agent_id: str, scope_keys: Sequence[str], now: datetime,
) -> list[FactHit]:
    facts = {f.fact_id: f for f in store.facts.get_facts([m.fact_id for m in merged])} if merged else {}
    hits = []
    for item in merged:
        fact = facts.get(item.fact_id)
        # defence in depth: a stale index never shows a retired, erased or foreign fact; and
        # an expired one is out now, whether beat has stamped it (moving the stamps) or not
        if fact is None or fact.retired_at is not None or fact.agent_id != agent_id or fact.scope_key not in scope_keys:
            continue
        if expired(fact, now):
            continue
        hits.append(FactHit(
            id=fact.fact_id, content=fact.content, scope=fact.scope, formed_at=fact.formed_at,
            updated_at=fact.changed_at, age=context.format_age(fact.changed_at, now), score=round(item.score, 6),
            expires_at=fact.expires_at,
        ))
    return hits


def _version_hit(version: FactVersion, score: float, as_of: datetime) -> FactHit:
    fact = version.fact
    return FactHit(
        id=fact.fact_id, content=version.content, scope=fact.scope, formed_at=fact.formed_at,
        updated_at=version.recorded_at, valid_from=version.valid_from, valid_to=version.valid_to,
        # aged from when the text became valid: it may have been recorded after as_of (a replay)
        age=context.format_age(version.valid_from, as_of), score=round(score, 6), expires_at=fact.expires_at,
    )
