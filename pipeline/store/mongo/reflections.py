"""Mongo store, reflections: buffered per scope key until a consolidation absorbs them.
A repository of ``MongoStore`` (``self.col``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from pymongo import ASCENDING

from pipeline.store import _common as c
from pipeline.store.mongo.codec import DuplicateKeyError, from_doc, to_doc
from pipeline.store.mongo.parts import CAS_ATTEMPTS
from pipeline.store.ports.reflections import ReflectionStore
from pipeline.store.mongo.parts import MongoRepository
from schemas.documents import Reflection, ReflectionEdit

#: reflections oldest first, as the port promises (ids break ties); provenance reads them so too
OLDEST = [("formed_at", ASCENDING), ("_id", ASCENDING)]


class MongoReflections(MongoRepository, ReflectionStore):
    col: Callable

    def insert_reflections(self, reflections: Sequence[Reflection]) -> int:
        new = 0
        for r in reflections:
            try:
                self.col("reflections").insert_one(to_doc(r, r.reflection_id))
                new += 1
            except DuplicateKeyError:
                pass  # already stored by an earlier attempt of the same stage
        return new

    def unabsorbed_reflections(self, agent_id: str, scope_key: str, limit: int | None = None) -> list[Reflection]:
        docs = self.col("reflections").find({"agent_id": agent_id, "scope_key": scope_key, "absorbed": False},
                                            sort=OLDEST, limit=limit or 0)
        return [from_doc(Reflection, d) for d in docs]

    def count_unabsorbed(self, agent_id: str, scope_keys: Sequence[str]) -> dict[str, int]:
        col = self.col("reflections")
        return {key: col.count_documents({"agent_id": agent_id, "scope_key": key, "absorbed": False})
                for key in scope_keys}

    def edit_reflection(self, reflection_id: str, content: str, now: datetime, by: str) -> Reflection | None:
        for _ in range(CAS_ATTEMPTS):
            current = from_doc(Reflection, self.col("reflections").find_one({"_id": reflection_id}))
            if current is None or current.absorbed:
                return None
            edit = ReflectionEdit(content=current.content, changed_at=c.utc(now), changed_by=by)
            won = self.col("reflections").update_one(
                {"_id": reflection_id, "absorbed": False, "content": current.content},
                {"$set": {"content": content}, "$push": {"history": edit.model_dump()}})
            if won.modified_count:
                return current.model_copy(update={"content": content, "history": [*current.history, edit]})
        return None

    def mark_absorbed(self, reflection_ids: Sequence[str], blob_version: int, now: datetime) -> int:
        result = self.col("reflections").update_many(
            {"_id": {"$in": list(dict.fromkeys(reflection_ids))}, "absorbed": False},
            {"$set": {"absorbed": True, "absorbed_at": c.utc(now), "consolidated_into": blob_version}},
        )
        return result.modified_count

    def list_reflections(self, agent_id: str, scope_key: str, *, include_absorbed: bool = True) -> list[Reflection]:
        query: dict = {"agent_id": agent_id, "scope_key": scope_key}
        if not include_absorbed:
            query["absorbed"] = False
        return [from_doc(Reflection, d) for d in self.col("reflections").find(query, sort=OLDEST)]
