"""Mongo store, consolidated blobs: one per (agent, scope key), written by compare-and-set
on ``version``. A repository of ``MongoStore`` (``self.col``)."""

from __future__ import annotations

from collections.abc import Callable

from pipeline.store.mongo.codec import DuplicateKeyError, from_doc, to_doc
from pipeline.store.ports.blobs import BlobStore
from pipeline.store.mongo.parts import MongoRepository
from schemas.documents import ConsolidatedBlob


class MongoBlobs(MongoRepository, BlobStore):
    col: Callable

    def get_blob(self, agent_id: str, scope_key: str) -> ConsolidatedBlob | None:
        return from_doc(ConsolidatedBlob, self.col("consolidated").find_one({"agent_id": agent_id, "scope_key": scope_key}))

    def save_blob(self, blob: ConsolidatedBlob, expected_version: int) -> bool:
        col = self.col("consolidated")
        if expected_version == 0:
            try:
                col.insert_one(to_doc(blob))
                return True
            except DuplicateKeyError:
                return False
        result = col.update_one({"agent_id": blob.agent_id, "scope_key": blob.scope_key, "version": expected_version},
                                {"$set": to_doc(blob)})
        return result.matched_count == 1
