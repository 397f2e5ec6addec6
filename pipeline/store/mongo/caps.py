"""Mongo store, spend caps set at run time (the ``CapStore`` port): one document per owner,
keyed by it."""

from __future__ import annotations

from datetime import datetime

from pymongo import ASCENDING

from pipeline.store.mongo.parts import MongoRepository
from pipeline.store.ports.caps import CapStore
from schemas.caps import SpendCaps

CAPS = "spend_caps"


class MongoCaps(MongoRepository, CapStore):

    def put_spend_caps(self, owner: str, caps: SpendCaps | None, now: datetime) -> None:
        if caps is None:
            self.col(CAPS).delete_one({"_id": owner})
            return
        self.col(CAPS).replace_one({"_id": owner}, {"_id": owner, "updated_at": now, "caps": caps.model_dump()},
                                   upsert=True)

    def get_spend_caps(self, owner: str) -> SpendCaps | None:
        doc = self.col(CAPS).find_one({"_id": owner})
        return SpendCaps.model_validate(doc["caps"]) if doc else None

    def list_spend_caps(self) -> dict[str, SpendCaps]:
        return {d["_id"]: SpendCaps.model_validate(d["caps"]) for d in self.col(CAPS).find({}, sort=[("_id", ASCENDING)])}
