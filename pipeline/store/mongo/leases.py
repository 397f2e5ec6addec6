"""Mongo store, named leases and scope version stamps. A repository of ``MongoStore``
(``self.col``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from pipeline.store import _common as c
from pipeline.store.mongo.codec import DuplicateKeyError
from pipeline.store.ports.leases import LeaseStore
from pipeline.store.mongo.parts import MongoRepository


class MongoLeases(MongoRepository, LeaseStore):
    col: Callable

    def acquire_lease(self, name: str, holder: str, now: datetime, ttl_s: float) -> bool:
        try:
            self.col("leases").find_one_and_update(
                {"_id": name, "$or": [{"holder": holder}, {"expires_at": {"$lte": c.utc(now)}}]},
                {"$set": {"holder": holder, "expires_at": c.lease_until(now, ttl_s)}}, upsert=True,
            )
            return True
        except DuplicateKeyError:
            return False  # held by another holder whose lease is live

    def release_lease(self, name: str, holder: str) -> None:
        self.col("leases").delete_one({"_id": name, "holder": holder})

    def bump_scope_versions(self, agent_id: str, scope_keys: Sequence[str]) -> None:
        col = self.col("scope_versions")
        for key in dict.fromkeys(scope_keys):
            for attempt in range(2):
                try:
                    col.update_one({"agent_id": agent_id, "scope_key": key}, {"$inc": {"version": 1}}, upsert=True)
                    break
                except DuplicateKeyError:
                    if attempt:  # two first bumps raced on the upsert: the retry updates
                        raise

    def get_scope_versions(self, agent_id: str, scope_keys: Sequence[str]) -> dict[str, int]:
        versions = {key: 0 for key in scope_keys}
        for d in self.col("scope_versions").find({"agent_id": agent_id, "scope_key": {"$in": list(scope_keys)}}):
            versions[d["scope_key"]] = d["version"]
        return versions
