"""Mongo store, the context cache: one assembled context per (session, user). No user id is
ever a field name (ids may hold ``.`` or ``$``): the cache keeps its version stamps as a list
of ``{k, v}`` pairs. A repository of ``MongoStore`` (``self.col``)."""

from __future__ import annotations

from collections.abc import Callable

from pipeline.store.mongo.codec import DuplicateKeyError, from_doc, to_doc
from pipeline.store.ports.contexts import ContextStore
from pipeline.store.mongo.parts import MongoRepository
from schemas.documents import CachedContext


class MongoContexts(MongoRepository, ContextStore):
    col: Callable

    def get_cached_context(self, session_id: str, user_id: str) -> CachedContext | None:
        doc = self.col("contexts").find_one({"session_id": session_id, "user_id": user_id})
        if doc is None:
            return None
        doc["versions"] = {pair["k"]: pair["v"] for pair in doc.get("versions", [])}
        return from_doc(CachedContext, doc)

    def put_cached_context(self, cached: CachedContext) -> None:
        doc = to_doc(cached)
        doc["versions"] = [{"k": k, "v": v} for k, v in cached.versions.items()]
        key = {"session_id": cached.session_id, "user_id": cached.user_id}
        try:
            self.col("contexts").replace_one(key, doc, upsert=True)
        except DuplicateKeyError:
            self.col("contexts").replace_one(key, doc)  # a concurrent first write won the upsert
