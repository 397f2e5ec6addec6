"""Mongo store, facts: their effects (insert, update, retire), reads, search candidates and
re-embedding. A repository of ``MongoStore`` (``self.col``).

Embeddings are stored as arrays of doubles, the shape Atlas ``$vectorSearch`` indexes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

import numpy as np
from pymongo import ASCENDING, DESCENDING

from pipeline import vectors
from pipeline.store import _common as c
from pipeline.store.mongo.codec import DuplicateKeyError, from_doc, to_doc
from pipeline.store.ports.facts import FactCandidate, FactStore, FactUpdate
from pipeline.store.mongo.parts import MongoRepository
from schemas.documents import Fact

_CAS_ATTEMPTS = 50
# ``live: true`` marks a fact that is not retired. The unique (agent, scope key, hash) index is
# partial on it, so that a retired fact never blocks its text from being formed again; a
# partial index can filter on ``live: true`` but not on ``retired_at: null``.
LIVE = "live"
# ``Fact.search_text``, stored: the Atlas search index analyses it (``pipeline.search.atlas``)
SEARCH_TEXT = "search_text"
# ``Fact.labels``, stored: filters by category and metadata match it, through the
# (agent_id, labels, scope_key) index here and as a filter path of the Atlas indexes
LABELS = "labels"
_NEWEST = [("formed_at", DESCENDING), ("_id", DESCENDING)]
_CHANGED = [("updated_at", DESCENDING), ("_id", DESCENDING)]


def _labelled(having: Sequence[Sequence[str]]) -> list[dict]:
    """A label of every group: ``$in`` on an array field matches any element of it."""
    return [{LABELS: {"$in": list(group)}} for group in having]


class MongoFacts(MongoRepository, FactStore):
    col: Callable

    def insert_fact(self, fact: Fact) -> tuple[bool, str]:
        facts = self.col("facts")
        doc = to_doc(fact, fact.fact_id)
        doc[LIVE] = fact.retired_at is None
        doc[SEARCH_TEXT] = fact.search_text
        doc[LABELS] = fact.labels
        for _ in range(_CAS_ATTEMPTS):
            try:
                facts.insert_one(doc)
                return True, fact.fact_id
            except DuplicateKeyError:
                holder = facts.find_one({"agent_id": fact.agent_id, "scope_key": fact.scope_key, "hash": fact.hash,
                                         LIVE: True}, {"_id": 1})
                if holder is not None:
                    return False, holder["_id"]
                if facts.find_one({"_id": fact.fact_id}, {"_id": 1}) is not None:
                    return False, fact.fact_id  # a rerun of this very insert
                # The live holder was retired in between: its text is free again.
        raise RuntimeError(f"insert_fact: the text of {fact.fact_id!r} kept changing hands; gave up")

    def update_fact(self, fact_id: str, change: FactUpdate) -> bool:
        def patch(fact: Fact) -> dict | None:
            if any(entry.run_id == change.run_id for entry in fact.history):
                return None  # this run's UPDATE is already applied
            entry, opened = c.closed_version(fact, change.now, change.valid_from, change.run_id)
            said = change.source_text or fact.source_text
            optional = {"expires_at": None} if change.clear_expiry else \
                {"expires_at": c.utc(change.expires_at)} if change.expires_at else {}
            if change.categories is not None:
                optional["categories"] = list(change.categories)
            if change.metadata is not None or change.replace_metadata is not None:
                # joined on the version read: the write below holds only while it is the live one
                optional["metadata"] = change.metadata_over(fact.metadata)
            updated = fact.model_copy(update={"content": change.content, "history": [*fact.history, entry],
                                              "source_text": said, **optional})
            return {"$set": {**optional, LABELS: updated.labels, "content": change.content, "hash": change.hash,
                             "embedding": None if change.embedding is None else [float(x) for x in change.embedding],
                             "embedding_model": change.embedding_model, "updated_at": c.utc(change.now),
                             "valid_from": opened,
                             "source_text": said, SEARCH_TEXT: updated.search_text},
                    "$inc": {"version": 1}, "$push": {"history": entry.model_dump()},
                    "$addToSet": {"source_message_ids": {"$each": list(change.source_message_ids)},
                                  "source_user_ids": {"$each": list(change.source_user_ids)}}}

        return self._change_live_fact(fact_id, change.expected_version, patch)

    def retire_fact(
        self, fact_id: str, now: datetime, run_id: str, *, valid_to: datetime | None = None,
        expected_version: int | None = None, reason: str | None = None,
    ) -> bool:
        # valid_to from the version read, so that an UPDATE in between cannot leave it before
        # that UPDATE's valid_from
        return self._change_live_fact(fact_id, expected_version, lambda fact: {
            "$set": {"retired_at": c.utc(now), "retired_by": run_id, LIVE: False, "retired_reason": reason,
                     "valid_to": c.valid_until(fact, now, valid_to)}})

    def expired_fact_ids(self, now: datetime, limit: int) -> list[str]:
        # a date range never matches null or a missing field (BSON comparison brackets by
        # type: https://www.mongodb.com/docs/manual/reference/operator/query/lte/)
        docs = self.col("facts").find({LIVE: True, "expires_at": {"$lte": c.utc(now)}}, {"_id": 1},
                                      sort=[("expires_at", ASCENDING), ("_id", ASCENDING)], limit=limit)
        return [d["_id"] for d in docs]

    def _change_live_fact(self, fact_id: str, expected_version: int | None,
                          change: Callable[[Fact], dict | None]) -> bool:
        """Compare and set: read the live fact, build the change from the version read (``None``:
        leave it), and write only while that version is still the live one, reading again
        when another write came in between. False when the fact is gone, retired, not at
        ``expected_version``, left as it was, or its new text already exists in its scope."""
        facts = self.col("facts")
        for _ in range(_CAS_ATTEMPTS):
            fact = from_doc(Fact, facts.find_one({"_id": fact_id}))
            if fact is None or fact.retired_at is not None:
                return False
            if expected_version is not None and fact.version != expected_version:
                return False
            update = change(fact)
            if update is None:
                return False
            try:
                result = facts.update_one({"_id": fact_id, "version": fact.version, "retired_at": None}, update)
            except DuplicateKeyError:
                return False  # an UPDATE's new text is already a live fact of the scope
            if result.matched_count:
                return True
        return False

    def get_facts(self, fact_ids: Iterable[str]) -> list[Fact]:
        ids = list(dict.fromkeys(fact_ids))
        found = {d["_id"]: from_doc(Fact, d) for d in self.col("facts").find({"_id": {"$in": ids}})}
        return [found[i] for i in ids if i in found]

    def find_fact_by_hash(self, agent_id: str, scope_key: str, hash: str) -> Fact | None:
        return from_doc(Fact, self.col("facts").find_one(
            {"agent_id": agent_id, "scope_key": scope_key, "hash": hash, "retired_at": None}))

    def search_candidates(
        self, agent_id: str, scope_keys: Sequence[str], embedding_model: str | None
    ) -> list[FactCandidate]:
        if not scope_keys:
            return []
        projection = {"_id": 1, "scope": 1, "user_id": 1, "content": 1, SEARCH_TEXT: 1, "formed_at": 1,
                      "embedding_model": 1}
        if embedding_model is not None:
            projection["embedding"] = 1
        docs = self.col("facts").find(
            {"agent_id": agent_id, "scope_key": {"$in": list(scope_keys)}, "retired_at": None}, projection)
        out = []
        for d in docs:
            vector = d.get("embedding") if embedding_model is not None and d.get("embedding_model") == embedding_model else None
            out.append(FactCandidate(
                d["_id"], d["scope"], d.get("user_id"), d.get(SEARCH_TEXT) or d["content"],
                None if vector is None else vectors.Float32Vector(np.asarray(vector, dtype=np.float32)),
                c.utc(d["formed_at"]),
            ))
        return out

    def recent_facts(
        self, agent_id: str, scope_keys: Sequence[str], since: datetime, limit: int | None, *,
        include_retired: bool = False, having: Sequence[Sequence[str]] = (),
    ) -> list[Fact]:
        query: dict = {"agent_id": agent_id, "scope_key": {"$in": list(scope_keys)},
                       "updated_at": {"$gte": c.utc(since)}}
        if not include_retired or having:
            query["retired_at"] = None
        if having:
            query["$and"] = _labelled(having)
        docs = self.col("facts").find(query, sort=_CHANGED, limit=limit or 0)
        return [from_doc(Fact, d) for d in docs]

    def labelled_fact_ids(
        self, agent_id: str, scope_keys: Sequence[str], having: Sequence[Sequence[str]],
    ) -> set[str]:
        if not scope_keys or not having or not all(having):
            return set()
        docs = self.col("facts").find(
            {"agent_id": agent_id, "scope_key": {"$in": list(scope_keys)}, LIVE: True, "$and": _labelled(having)},
            {"_id": 1})
        return {d["_id"] for d in docs}

    def recent_fact_ids(
        self, agent_id: str, scope_key: str, embedding_model: str, since: datetime, limit: int
    ) -> list[str]:
        docs = self.col("facts").find(
            {"agent_id": agent_id, "scope_key": scope_key, "embedding_model": embedding_model, LIVE: True,
             "formed_at": {"$gte": c.utc(since)}}, {"_id": 1}, sort=_NEWEST, limit=limit)
        return [d["_id"] for d in docs]

    def record_fact_access(self, fact_ids: Sequence[str], now: datetime) -> None:
        self.col("facts").update_many({"_id": {"$in": list(dict.fromkeys(fact_ids))}},
                                      {"$inc": {"access_count": 1}, "$set": {"last_accessed_at": c.utc(now)}})

    def list_facts(
        self, agent_id: str, scope_key: str | None = None, *, include_retired: bool = False,
        limit: int | None = None, offset: int = 0,
    ) -> list[Fact]:
        query: dict = {"agent_id": agent_id}
        if scope_key is not None:
            query["scope_key"] = scope_key
        if not include_retired:
            query["retired_at"] = None
        docs = self.col("facts").find(query, sort=_NEWEST, limit=limit or 0, skip=max(offset, 0))
        return [from_doc(Fact, d) for d in docs]

    def count_facts(self, agent_id: str, scope_key: str) -> int:
        return self.col("facts").count_documents({"agent_id": agent_id, "scope_key": scope_key, "retired_at": None})

    def memory_scope_keys(self, agent_id: str) -> list[str]:
        # each served by the collection's (agent_id, scope_key, ...) index
        keys = set(self.col("facts").distinct("scope_key", {"agent_id": agent_id, "retired_at": None}))
        for collection in ("reflections", "consolidated"):
            keys.update(self.col(collection).distinct("scope_key", {"agent_id": agent_id}))
        return sorted(keys)

    def other_embedding_model(self, agent_id: str, model: str) -> str | None:
        found = self.col("facts").find_one(
            {"agent_id": agent_id, LIVE: True, "embedding_model": {"$nin": [model, None]}}, {"embedding_model": 1})
        return found["embedding_model"] if found else None

    def iter_facts_for_reembed(self, agent_id: str | None, not_model: str, batch: int) -> Iterable[list[Fact]]:
        after = ""
        while True:
            query: dict = {"retired_at": None, "embedding_model": {"$ne": not_model}, "_id": {"$gt": after}}
            if agent_id is not None:
                query["agent_id"] = agent_id
            docs = list(self.col("facts").find(query, sort=[("_id", ASCENDING)], limit=batch))
            if not docs:
                return
            after = docs[-1]["_id"]
            yield [from_doc(Fact, d) for d in docs]

    def set_fact_embedding(self, fact_id: str, embedding: list[float], model: str) -> None:
        self.col("facts").update_one({"_id": fact_id}, {"$set": {
            "embedding": [float(x) for x in embedding], "embedding_model": model}})
