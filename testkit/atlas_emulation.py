"""Atlas Search and Vector Search for the Mongo test emulation (mongomock has neither).

Per collection, a ``SearchCatalog`` holds the search indexes (``create_search_index``,
``list_search_indexes`` with ``status`` / ``queryable`` / ``latestDefinition``,
``update_search_index``, ``drop_search_index``) and runs aggregation pipelines that start with
``$vectorSearch`` or ``$search``: the stage is checked against Atlas's rules
(``atlas_rules``), executed (``atlas_engine``), and the rest of the pipeline runs on
mongomock with ``{"$meta": "vectorSearchScore" | "searchScore"}`` bound to the score.

Timing, on the emulation's clock (``AtlasSettings.clock``, a ``pipeline.clock.Clock``):
- ``build_s``: a new or updated index is BUILDING for this long; a new one is not queryable
  until then, an updated one keeps serving its previous definition meanwhile
  (https://www.mongodb.com/docs/atlas/atlas-search/manage-indexes/ "Atlas Search continues to
  serve queries using the old index while it rebuilds"). Each update counts as a rebuild.
- ``index_lag_s``: index lag. mongot follows the collection's change stream, so a write is
  searchable only after a delay (https://www.mongodb.com/docs/atlas/atlas-search/about/
  "Atlas Search ... eventually consistent"). With a lag, every write records a snapshot of the
  collection; a search sees the newest snapshot at least ``index_lag_s`` old.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from typing import Any

import mongomock_ng
import numpy as np

from pipeline.clock import Clock
from testkit import atlas_engine as engine
from testkit import atlas_rules as rules

SCORE_FIELD = "__emulated_search_score"
_META = {"$vectorSearch": "vectorSearchScore", "$search": "searchScore"}
_ids = itertools.count(1)


@dataclass
class AtlasSettings:
    clock: Clock = field(default_factory=Clock)
    build_s: float = 0.0
    index_lag_s: float = 0.0

    def now(self) -> float:
        return self.clock.now().timestamp()


@dataclass
class _Index:
    name: str
    type: str
    latest: dict[str, Any]
    serving: dict[str, Any] | None
    ready_at: float
    version: int = 0
    id: str = field(default_factory=lambda: f"emulated{next(_ids):08d}")


class SearchCatalog:
    """One collection's search indexes and what mongot has indexed of it."""

    def __init__(self, collection, settings: AtlasSettings) -> None:
        self._collection = collection
        self._settings = settings
        self._indexes: dict[str, _Index] = {}
        self._snapshots: list[tuple[float, list[dict]]] = []
        self.rebuilds = 0
        self.sent: list[list[dict[str, Any]]] = []   # every search pipeline, as received

    # ------------------------------------------------------------------ index management ---
    def create(self, model) -> str:
        doc = dict(getattr(model, "document", model))
        doc.setdefault("name", "default")
        doc.setdefault("type", "search")
        rules.check_index_model(doc)
        if doc["name"] in self._indexes:
            raise rules.refuse(f"Duplicate Index: {doc['name']!r} already exists", rules.SEARCH_STAGE, 68)
        now = self._settings.now()
        self._indexes[doc["name"]] = _Index(doc["name"], doc["type"], copy.deepcopy(doc["definition"]), None,
                                            now + self._settings.build_s)
        self._refresh(now)
        return doc["name"]

    def update(self, name: str, definition: dict[str, Any]) -> None:
        index = self._indexes.get(name)
        if index is None:
            raise rules.refuse(f"Index {name!r} not found", rules.SEARCH_STAGE, 27)
        rules.check_index_model({"name": name, "type": index.type, "definition": definition})
        now = self._settings.now()
        self._refresh(now)
        index.latest, index.version = copy.deepcopy(definition), index.version + 1
        index.ready_at = now + self._settings.build_s
        self.rebuilds += 1
        self._refresh(now)

    def drop(self, name: str) -> None:
        self._indexes.pop(name, None)

    def list(self, name: str | None = None) -> list[dict[str, Any]]:
        self._refresh(self._settings.now())
        out = []
        for index in self._indexes.values():
            if name is not None and index.name != name:
                continue
            building = index.serving is not index.latest
            out.append({
                "id": index.id, "name": index.name, "type": index.type,
                "status": "BUILDING" if building else "READY",
                "queryable": index.serving is not None,
                "latestDefinitionVersion": {"version": index.version},
                "latestDefinition": copy.deepcopy(index.latest),
            })
        return out

    def _refresh(self, now: float) -> None:
        for index in self._indexes.values():
            if index.ready_at <= now:
                index.serving = index.latest

    # ------------------------------------------------------------------ index lag ----------
    def after_write(self) -> None:
        if self._settings.index_lag_s > 0:
            self._snapshots.append((self._settings.now(), self._documents()))

    def start_lag(self) -> None:
        """What is stored now counts as indexed long ago."""
        self._snapshots = [(float("-inf"), self._documents())]

    def _documents(self) -> list[dict]:
        return [copy.deepcopy(d) for d in self._collection.find({})]

    def _indexed_documents(self) -> list[dict]:
        if self._settings.index_lag_s <= 0 or not self._snapshots:
            return self._documents()
        horizon = self._settings.now() - self._settings.index_lag_s
        visible = [i for i, (at, _) in enumerate(self._snapshots) if at <= horizon]
        if not visible:
            return []
        keep = visible[-1]
        self._snapshots = self._snapshots[keep:]
        return self._snapshots[0][1]

    # ------------------------------------------------------------------ aggregation --------
    def aggregate(self, pipeline: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.sent.append(copy.deepcopy(pipeline))
        for position, stage in enumerate(pipeline):
            for name in _META:
                if name in stage and position != 0:
                    # vector-search-stage / $search docs: "must be the first stage of any pipeline"
                    raise rules.refuse(f"{name} is only valid as the first stage in a pipeline",
                                       rules.VS_STAGE if name == "$vectorSearch" else rules.SEARCH_STAGE, 40602)
        first = next(iter(pipeline[0]))
        self._refresh(self._settings.now())
        if first == "$vectorSearch":
            ranked = self._vector_search(pipeline[0][first])
        else:
            ranked = self._search(pipeline[0][first])
        return _run_rest(pipeline[1:], ranked, _META[first])

    def _serving(self, name: str, kind: str) -> dict[str, Any] | None:
        index = self._indexes.get(name)
        if index is None or index.type != kind:
            return None
        return index.serving

    def _vector_search(self, spec: dict[str, Any]) -> list[tuple[dict, float]]:
        index = self._indexes.get(spec.get("index")) if isinstance(spec, dict) else None
        if index is not None and index.type == "vectorSearch" and index.serving is None:
            return []  # not queryable yet: the first build has not finished
        definition = self._serving(spec.get("index"), "vectorSearch") if isinstance(spec, dict) else None
        rules.check_vector_stage(spec, definition)
        field_spec = rules.declared_vector(definition, spec["path"])
        query = np.asarray(spec["queryVector"], dtype=np.float64)
        condition = spec.get("filter") or {}
        scored = []
        for doc in self._indexed_documents():
            vector = doc.get(spec["path"])
            # a document whose vector has another length is not indexed (vector-search-type docs)
            if not isinstance(vector, list) or len(vector) != field_spec["numDimensions"]:
                continue
            if condition and not mongomock_ng.filtering.filter_applies(condition, doc):
                continue
            scored.append((doc, engine.vector_score(field_spec["similarity"], query, np.asarray(vector, dtype=np.float64))))
        scored.sort(key=lambda pair: -pair[1])
        return scored[:spec["limit"]]

    def _search(self, spec: dict[str, Any]) -> list[tuple[dict, float]]:
        name = spec.get("index", "default") if isinstance(spec, dict) else None
        index = self._indexes.get(name)
        if index is not None and index.type == "search" and index.serving is None:
            return []
        definition = self._serving(name, "search")
        operator, body = rules.check_search_stage(spec, definition)
        docs = self._indexed_documents()
        matched, scores = _evaluate(operator, body, docs, definition)
        ranked = [(doc, score) for doc, ok, score in zip(docs, matched, scores) if ok]
        ranked.sort(key=lambda pair: -pair[1])
        return ranked


def _evaluate(operator: str, spec: Any, docs: list[dict], definition: dict) -> tuple[list[bool], list[float]]:
    if operator == "text":
        rules.check_text(spec, definition)
        matched, scores = [False] * len(docs), [0.0] * len(docs)
        for path in ([spec["path"]] if isinstance(spec["path"], str) else spec["path"]):
            field = engine.TextField(docs, path, engine.analyzer_for(definition, path))
            m, s = field.scores(spec["query"], spec.get("fuzzy"))
            matched = [a or b for a, b in zip(matched, m)]
            scores = [max(a, b) for a, b in zip(scores, s)]
        return matched, scores
    if operator in ("equals", "in"):
        rules.check_equals(spec, definition, operator)
        wanted = spec["value"] if operator == "in" else [spec["value"]]
        matched = [_holds(doc.get(spec["path"]), wanted) for doc in docs]
        return matched, [1.0 if m else 0.0 for m in matched]
    if operator == "compound":
        return _compound(spec, docs, definition)
    raise NotImplementedError(f"the Atlas emulation does not implement the $search operator {operator!r}")


def _holds(value: Any, wanted: list) -> bool:
    values = value if isinstance(value, list) else [value]
    return any(v == w and type(v) is type(w) or (isinstance(v, (int, float)) and not isinstance(v, bool)
                                                and isinstance(w, (int, float)) and not isinstance(w, bool) and v == w)
               for v in values for w in wanted)


def _compound(spec: dict[str, Any], docs: list[dict], definition: dict) -> tuple[list[bool], list[float]]:
    unknown = set(spec) - rules.COMPOUND_CLAUSES
    if unknown:
        raise rules.refuse(f"compound: unknown clause {sorted(unknown)[0]!r}", rules.SEARCH_STAGE, 9)
    n = len(docs)
    matched, scores = [True] * n, [0.0] * n
    should_hits = [0] * n

    def clauses(name):
        value = spec.get(name, [])
        return value if isinstance(value, list) else [value]

    for name in ("must", "filter", "mustNot", "should"):
        for clause in clauses(name):
            if not isinstance(clause, dict) or len(clause) != 1:
                raise rules.refuse(f"compound.{name}: each clause is one operator", rules.SEARCH_STAGE, 9)
            (operator, body), = clause.items()
            m, s = _evaluate(operator, body, docs, definition)
            for i in range(n):
                if name in ("must", "filter"):
                    matched[i] = matched[i] and m[i]
                elif name == "mustNot":
                    matched[i] = matched[i] and not m[i]
                elif m[i]:
                    should_hits[i] += 1
                if m[i] and name in ("must", "should"):
                    scores[i] += s[i]
    minimum = spec.get("minimumShouldMatch", 0 if (clauses("must") or clauses("filter")) else 1)
    if clauses("should"):
        matched = [ok and hits >= minimum for ok, hits in zip(matched, should_hits)]
    return matched, scores


def _run_rest(rest: list[dict[str, Any]], ranked: list[tuple[dict, float]], meta: str) -> list[dict[str, Any]]:
    """The stages after the search stage, on mongomock, with the score bound to ``$meta``."""
    scratch = mongomock_ng.MongoClient(tz_aware=True)["scratch"]["results"]
    docs = []
    for doc, score in ranked:
        doc = copy.deepcopy(doc)
        doc[SCORE_FIELD] = score
        docs.append(doc)
    if docs:
        scratch.insert_many(docs)
    out = list(scratch.aggregate([_bind_meta(stage, meta) for stage in rest])) if rest else list(scratch.find({}))
    for doc in out:
        doc.pop(SCORE_FIELD, None)
    return out


def _bind_meta(node: Any, meta: str) -> Any:
    if isinstance(node, dict):
        if set(node) == {"$meta"}:
            if node["$meta"] != meta:
                raise rules.refuse(f"$meta {node['$meta']!r} is not available after this search stage (only {meta!r})",
                                   rules.VS_STAGE if meta == "vectorSearchScore" else rules.SEARCH_STAGE, 17308)
            return f"${SCORE_FIELD}"
        return {k: _bind_meta(v, meta) for k, v in node.items()}
    if isinstance(node, list):
        return [_bind_meta(v, meta) for v in node]
    return node
