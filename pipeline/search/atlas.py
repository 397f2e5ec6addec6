"""Atlas fact search (design §7): ``$vectorSearch`` and ``$search`` over the Mongo facts collection.

Both branches pre-filter inside the search stage, never after it:
- ``$vectorSearch.filter``: ``agent_id`` ==, ``scope_key`` $in the visible keys,
  ``embedding_model`` == the query's model, ``live`` == true;
- ``$search.compound.filter``: ``equals`` on ``agent_id`` and ``live`` (true) and ``in``
  on ``scope_key``, beside ``text`` clauses on ``search_text`` (``Fact.search_text``: the
  content, the texts it replaced and its source message), analysed by the same chain as
  ``scoring.tokenize`` (standard tokenizer, lower case, the same stopwords, Snowball English
  stemming).

Typo tolerance is the local search's: one edit, first letter fixed, and only for terms of
``scoring.FUZZY_MIN_LENGTH``+ letters that are not all digits ("cat" is not "cot", "2023" is not
"2024"). Atlas's ``text.fuzzy`` has no minimum term length (its options are ``maxEdits``,
``prefixLength`` and ``maxExpansions``: https://www.mongodb.com/docs/atlas/atlas-search/text/),
so the query is split here: the words whose term may be fuzzy go to a fuzzy ``text`` clause,
the others to an exact one, both ``should`` with ``minimumShouldMatch`` 1. Lucene sums the
clauses' scores, so a document scores the same BM25 sum as one ``text`` clause would; each
distinct term is sent once, as the local search counts it once. Left different: Atlas expands
a fuzzy term to at most ``maxExpansions`` (50) vocabulary terms, the local search to all of
them; and Atlas's BM25 statistics are those of the whole index, the local search's those of
the pre-filtered candidates. The text threshold follows one rule on both: it is scaled to the
number of live facts the branch searches (``scoring.text_threshold_scale``), which Atlas gets
from a ``count_documents`` on the same pre-filter, served by the store's
(agent_id, scope_key, retired_at) index and stopped at ``scoring.TEXT_THRESHOLD_DOCS`` (no
larger store is scaled). Without it a small agent found text hits locally and none on Atlas:
a word in one fact of five scores about 1.1, under the 1.5 stated for 500 facts.

Retired facts are excluded through the boolean ``live`` flag the store keeps beside
``retired_at``, never through ``retired_at: null``: a ``$vectorSearch`` filter refuses a null
operand (server error 7828301 "Operand type is not supported for $vectorSearch: null",
mongodb/mongo ``src/mongo/db/query/vector_search/filter_validator_test.cpp``
``DisallowOperandTypeNull``; the filterable types are boolean, date, objectId, numeric,
string and UUID: https://www.mongodb.com/docs/atlas/atlas-vector-search/vector-search-stage/),
and ``equals`` with null on a ``date`` field has no documented meaning.

Scores are the ones Atlas reports: ``vectorSearchScore`` of a cosine index is (1 + cos) / 2,
``searchScore`` is Lucene BM25. Every path a filter uses is declared in the index definitions
emitted here (``memoryctl create-indexes`` creates them through ``atlas_indexes``);
``tests/pipeline/search/test_atlas_search.py`` checks the built pipelines against them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from pipeline.search import scoring
from pipeline.search.port import FactSearch, Hit
from pipeline.store.mongo.unavailable import unavailable
from pipeline.store._unavailable import translating

VECTOR_INDEX = "memory_facts_vector"
SEARCH_INDEX = "memory_facts_text"
EMBEDDING_PATH = "embedding"
#: the text the text branch analyses (``Fact.search_text``, stored by the Mongo adapter)
TEXT_PATH = "search_text"
ANALYZER = "memoryText"
#: the store's boolean "not retired" flag (``pipeline.store.mongo.facts.LIVE``)
LIVE_PATH = "live"
#: a fact's labels (``pipeline.store.mongo.facts.LABELS``): what filters by category and metadata match
LABELS_PATH = "labels"
#: every path either index is filtered on (the vector index declares each as ``filter``)
FILTER_PATHS = ("agent_id", "user_id", "scope", "scope_key", "embedding_model", LIVE_PATH, LABELS_PATH)
#: ANN breadth: candidates examined per wanted result (Atlas recommends 10-20x)
CANDIDATES_PER_RESULT = 20
MAX_CANDIDATES = 10_000
QUERY_TIMEOUT_MS = 5_000

SEARCH_ANALYZER: dict[str, Any] = {
    "name": ANALYZER,
    "tokenizer": {"type": "standard"},
    "tokenFilters": [
        {"type": "icuNormalizer", "normalizationForm": "nfkc"},
        {"type": "lowercase"},
        # accents folded, as scoring.fold_accents folds them locally
        {"type": "icuFolding"},
        {"type": "stopword", "tokens": sorted(scoring.STOPWORDS), "ignoreCase": True},
        {"type": "snowballStemming", "stemmerName": "english"},
    ],
}


def vector_index_definition(dim: int) -> dict[str, Any]:
    """The ``vectorSearch`` index: cosine over ``embedding`` plus every filter path."""
    if not isinstance(dim, int) or dim <= 0:
        raise ValueError(f"vector index: numDimensions must be a positive integer, got {dim!r}")
    return {
        "name": VECTOR_INDEX,
        "type": "vectorSearch",
        "definition": {
            "fields": [
                {"type": "vector", "path": EMBEDDING_PATH, "numDimensions": dim, "similarity": "cosine"},
                *({"type": "filter", "path": path} for path in FILTER_PATHS),
            ],
        },
    }


def search_index_definition() -> dict[str, Any]:
    """The ``search`` index: analysed ``search_text`` and the filter paths indexed for ``equals``/``in``."""
    fields: dict[str, Any] = {TEXT_PATH: {"type": "string", "analyzer": ANALYZER}}
    for path in FILTER_PATHS:
        fields[path] = {"type": "boolean"} if path == LIVE_PATH else {"type": "token"}
    return {
        "name": SEARCH_INDEX,
        "type": "search",
        "definition": {
            "analyzer": ANALYZER,
            "analyzers": [SEARCH_ANALYZER],
            "mappings": {"dynamic": False, "fields": fields},
        },
    }


def vector_pipeline(
    agent_id: str, scope_keys: Sequence[str], embedding_model: str, vector: Sequence[float],
    limit: int, min_score: float | None, having: Sequence[Sequence[str]] = (),
) -> list[dict[str, Any]]:
    """``having``: label groups, each a ``$in`` on the labels array (it matches any element;
    an array of strings is a filterable type: https://www.mongodb.com/docs/atlas/atlas-vector-search/vector-search-type/)."""
    pipeline: list[dict[str, Any]] = [
        {"$vectorSearch": {
            "index": VECTOR_INDEX,
            "path": EMBEDDING_PATH,
            "queryVector": [float(x) for x in vector],
            "numCandidates": min(MAX_CANDIDATES, max(limit * CANDIDATES_PER_RESULT, 100)),
            "limit": limit,
            "filter": {"$and": [
                {"agent_id": {"$eq": agent_id}},
                {"scope_key": {"$in": list(scope_keys)}},
                {"embedding_model": {"$eq": embedding_model}},
                {LIVE_PATH: {"$eq": True}},
                *({LABELS_PATH: {"$in": list(group)}} for group in having),
            ]},
        }},
        {"$project": {"_id": 0, "fact_id": 1, "score": {"$meta": "vectorSearchScore"}}},
    ]
    if min_score is not None:
        pipeline.append({"$match": {"score": {"$gte": min_score}}})
    return pipeline


#: Atlas's default and documented cap on the vocabulary terms one fuzzy term expands to
FUZZY_MAX_EXPANSIONS = 50


def split_query(query: str) -> tuple[list[str], list[str]]:
    """The query's words in two groups, each distinct term once: those whose term may match
    with a typo (``scoring.fuzzy_eligible``) and those that must match exactly. Stopwords go."""
    fuzzy: list[str] = []
    exact: list[str] = []
    seen: set[str] = set()
    for word in scoring.words(query):
        terms = [t for t in scoring.tokenize(word) if t not in seen]
        if not terms:
            continue  # a stopword, or a term already sent
        seen.update(terms)
        (fuzzy if scoring.fuzzy_eligible(terms[0]) else exact).append(word)
    return fuzzy, exact


def text_clauses(query: str) -> list[dict[str, Any]]:
    fuzzy, exact = split_query(query)
    clauses: list[dict[str, Any]] = []
    if fuzzy:
        clauses.append({"text": {
            "query": " ".join(fuzzy), "path": TEXT_PATH,
            "fuzzy": {
                "maxEdits": scoring.FUZZY_MAX_EDITS,
                "prefixLength": scoring.FUZZY_PREFIX_LENGTH,
                "maxExpansions": FUZZY_MAX_EXPANSIONS,
            },
        }})
    if exact:
        clauses.append({"text": {"query": " ".join(exact), "path": TEXT_PATH}})
    return clauses


def text_pipeline(
    agent_id: str, scope_keys: Sequence[str], query: str, limit: int, min_score: float | None,
    having: Sequence[Sequence[str]] = (),
) -> list[dict[str, Any]]:
    """``query`` must hold at least one term (``scoring.tokenize``): a query of stopwords only
    matches nothing and is not sent. ``having``: label groups, each an ``in`` on the labels
    (a ``token`` field; on an array it matches any element:
    https://www.mongodb.com/docs/atlas/atlas-search/in/)."""
    clauses = text_clauses(query)
    if not clauses:
        raise ValueError(f"text search: the query {query!r} has no searchable term")
    pipeline: list[dict[str, Any]] = [
        {"$search": {
            "index": SEARCH_INDEX,
            "compound": {
                "should": clauses,
                "minimumShouldMatch": 1,
                "filter": [
                    {"equals": {"path": "agent_id", "value": agent_id}},
                    {"in": {"path": "scope_key", "value": list(scope_keys)}},
                    {"equals": {"path": LIVE_PATH, "value": True}},
                    *({"in": {"path": LABELS_PATH, "value": list(group)}} for group in having),
                ],
            },
        }},
        {"$limit": limit},
        {"$project": {"_id": 0, "fact_id": 1, "score": {"$meta": "searchScore"}}},
    ]
    if min_score is not None:
        pipeline.append({"$match": {"score": {"$gte": min_score}}})
    return pipeline


class Collections(Protocol):
    """A Mongo store's collections by name (``MongoStore.col``): Atlas Search runs on the facts one."""

    def col(self, name: str) -> Any: ...


class AtlasFactSearch(FactSearch):
    """Runs the pipelines above on the facts collection (Atlas or ``mongodb-atlas-local``)."""

    def __init__(self, facts_collection) -> None:
        self._facts = facts_collection

    @classmethod
    def from_store(cls, store: Collections) -> "AtlasFactSearch":
        return cls(store.col("facts"))

    def _run(self, pipeline: list[dict[str, Any]]) -> list[Hit]:
        # The same translation as the Mongo store's (``store/mongo/unavailable.py``): during
        # a failover a search raises ``StoreUnavailable``, which a formation stage retries and
        # an agent can tell from a bug, not a raw driver error. The cursor is drained inside,
        # since a later batch can fail too.
        with translating(unavailable):
            docs = list(self._facts.aggregate(pipeline, maxTimeMS=QUERY_TIMEOUT_MS))
        return [Hit(str(d["fact_id"]), float(d["score"])) for d in docs]

    def semantic(
        self, agent_id: str, scope_keys: Sequence[str], embedding_model: str,
        vector: Sequence[float], limit: int, min_score: float | None, *, having: Sequence[Sequence[str]] = (),
    ) -> list[Hit]:
        if not scope_keys or limit <= 0:
            return []
        return self._run(vector_pipeline(agent_id, scope_keys, embedding_model, vector, limit, min_score, having))

    def text(
        self, agent_id: str, scope_keys: Sequence[str], query: str, limit: int,
        min_score: float | None, *, having: Sequence[Sequence[str]] = (),
    ) -> list[Hit]:
        if not scope_keys or limit <= 0 or not scoring.tokenize(query):
            return []
        floor = None if min_score is None else min_score / scoring.text_threshold_scale(self.searched(agent_id, scope_keys))
        return self._run(text_pipeline(agent_id, scope_keys, query, limit, floor, having))

    def searched(self, agent_id: str, scope_keys: Sequence[str]) -> int:
        """How many live facts the text branch searches, up to ``scoring.TEXT_THRESHOLD_DOCS``
        (the count the local search scales its threshold by; a bigger store is not scaled)."""
        with translating(unavailable):
            return self._facts.count_documents(
                {"agent_id": agent_id, "scope_key": {"$in": list(scope_keys)}, "retired_at": None},
                limit=scoring.TEXT_THRESHOLD_DOCS, maxTimeMS=QUERY_TIMEOUT_MS,
            )
