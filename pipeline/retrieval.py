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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pipeline import tracing
from pipeline.embeddings.port import Embedder
from pipeline.errors import InvalidInput, TransientError
from pipeline.owner.categories import MAX_CATEGORIES
from pipeline.search import scoring
from pipeline.search.as_of import search_as_of
from pipeline.search.defaults import model_defaults
from pipeline.search.hits import Found, live_hits, version_hit
from pipeline.search.models import check_one_model
from pipeline.search.port import FactSearch, Hit
from pipeline.search.query import FactQuery, SearchClients
from pipeline.threads import shared_pool
from pipeline.validity import check_as_of
from pipeline.visibility import read_visibility
from schemas.metadata import FILTER_CATEGORIES_HELP, FILTER_METADATA_SCHEMA
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
                "categories": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_CATEGORIES,
                               "description": FILTER_CATEGORIES_HELP},
                "metadata": FILTER_METADATA_SCHEMA,
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
    signals: Sequence[str] = ("semantic", "text"), having: Sequence[Sequence[str]] = (),
) -> tuple[list[scoring.Fused], dict[str, Any]]:
    """One query: its branches (``signals``), thresholds, then RRF; best ``top_k`` first.
    ``having``: the label groups of a filter, applied inside each branch."""
    limit = max(MIN_BRANCH_LIMIT, BRANCH_DEPTH * top_k)
    t0 = time.perf_counter()
    semantic: list[Hit] = []
    if vector is not None and "semantic" in signals:
        semantic = search.semantic(agent_id, scope_keys, embedding_model, vector, limit, limits.semantic,
                                   having=having)
    t1 = time.perf_counter()
    lexical: list[Hit] = []
    if "text" in signals:
        lexical = search.text(agent_id, scope_keys, text, limit, limits.text, having=having)
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


def search_facts(clients: SearchClients, asked: FactQuery) -> Found:
    """The facts found, best first (``Found.hits``); each hit's age counts from its latest
    change (``updated_at``). ``Found.documented()`` is the answer in the documented shape.

    With ``asked.debug``, ``Found.debug`` holds every stage's timings and scores. Without
    ``asked.view`` the view is read here (``pipeline.visibility``: the group-chat rule over
    the session's humans as stored). With ``asked.as_of`` the facts are searched as they were
    valid then (``pipeline.search.as_of``): each hit shows the text valid then, with its
    ``valid_from`` and ``valid_to``, aged from ``valid_from`` to ``as_of``; no access is
    recorded.
    """
    start = time.perf_counter()
    queries, top_k, as_of = normalize_queries(asked.query), _check_top_k(asked.top_k), check_as_of(asked.as_of)
    timings: dict[str, Any] = {}
    with _timed(timings, "visibility"):
        view = asked.view if asked.view is not None else read_visibility(
            clients.store, clients.settings, asked.agent_id, session_id=asked.session_id, user_id=asked.user_id)
    scope_keys = view.fact_scope_keys if view.search_offered else ()
    search, versions, as_of_error = clients.search, {}, None
    if as_of is not None and scope_keys:
        with _timed(timings, "as_of"):
            search, versions, as_of_error = search_as_of(clients.store.facts, clients.embedder, asked.agent_id,
                                                         scope_keys, as_of)
    embedded = _embed(clients, asked.agent_id, queries, scope_keys, timings)
    limits = asked.thresholds or Thresholds.from_settings(clients.settings, embedded.model)
    with _timed(timings, "search"):
        having = asked.where.groups() if asked.where else []
        per_query = _rank_all(search, asked.agent_id, scope_keys, embedded, queries, top_k, limits, having)
        merged = scoring.merge_best(fused for fused, _ in per_query)
    with _timed(timings, "fetch"):
        now = clients.clock.now()
        if as_of is None:
            hits = live_hits(clients.store.facts, merged, asked.agent_id, scope_keys, now, asked.where)
        else:
            hits = [version_hit(versions[m.fact_id], m.score, as_of) for m in merged if m.fact_id in versions
                    and (not asked.where or asked.where.matches(versions[m.fact_id].fact.labels))]
    if asked.track_access and hits and as_of is None:
        with _timed(timings, "access"):
            clients.store.facts.record_fact_access([hit.id for hit in hits], now)
    timings["total"] = _ms(start)
    tracing.set_attributes({**{f"memory.{k}_ms": v for k, v in timings.items() if isinstance(v, (int, float))},
                            "memory.results": len(hits), "memory.embed_failed": embedded.error is not None})
    if not asked.debug:
        return Found(hits=hits)
    return Found(hits=hits, debug={
        "agent_id": asked.agent_id, "scope_keys": list(scope_keys), "group_chat": view.group_chat,
        "offered": view.search_offered, "embedding_model": embedded.model,
        "embed_error": embedded.error or as_of_error, "as_of": as_of.isoformat() if as_of else None,
        "thresholds": limits.describe(), "where": asked.where.describe() if asked.where else None,
        "timings_ms": timings, "queries": [info for _, info in per_query],
    })


@contextmanager
def _timed(timings: dict[str, Any], step: str) -> Iterator[None]:
    """Times the step inside, in ms, under ``timings[step]`` (the debug answer and the span)."""
    start = time.perf_counter()
    yield
    timings[step] = _ms(start)


@dataclass(frozen=True)
class _Embedded:
    """The queries' vectors (None: that query searches text alone), the model, and why the
    embedding failed when it did."""

    vectors: list[Sequence[float] | None]
    model: str
    error: str | None = None


def _embed(
    clients: SearchClients, agent_id: str, queries: list[str], scope_keys: Sequence[str], timings: dict[str, Any],
) -> _Embedded:
    """The queries embedded with the agent's one embedding model; none when nothing may be
    searched or no embedder is set. A provider that is down or slow leaves the text branch
    alone rather than failing the agent's tool call."""
    embedder = clients.embedder
    nothing: list[Sequence[float] | None] = [None] * len(queries)
    model = embedder.model if embedder is not None else ""
    if not scope_keys or embedder is None:
        return _Embedded(nothing, model)
    check_one_model(clients.store.facts, agent_id, model)
    with _timed(timings, "embed"):
        try:
            return _Embedded(list(tracing.embed(embedder, queries, "query").vectors), model)
        except TransientError as exc:
            error = f"{type(exc).__name__}: {exc}"
            log.warning("search_facts: embedding failed, text search only: %s", error)
            return _Embedded(nothing, model, error)


def _rank_all(
    search: FactSearch, agent_id: str, scope_keys: Sequence[str], embedded: _Embedded, queries: list[str],
    top_k: int, limits: Thresholds, having: Sequence[Sequence[str]],
) -> list[tuple[list[scoring.Fused], dict[str, Any]]]:
    """Each query ranked (``rank_query``), in parallel when there are several."""
    if not scope_keys:
        return []
    args = [(search, agent_id, scope_keys, embedded.model, q, v, top_k, limits, ("semantic", "text"), having)
            for q, v in zip(queries, embedded.vectors)]
    if len(args) == 1:
        return [rank_query(*args[0])]
    return list(shared_pool("search_facts", MAX_QUERIES).map(lambda a: rank_query(*a), args))
