"""The Mongo side of the roll-up port (``ports.rollups``): one document per (agent, scope, scope
id, day, stage, model), added to by upserts with ``$inc``.

Each increment is one ``updateOne`` with ``upsert``: ``$inc`` on the sums, ``$setOnInsert`` on
the descriptive fields and ``$addToSet``/``$each`` on the snapshots, no path named by two
operators (the server refuses that: "Updating the path 'x' would create a conflict at 'x'").
``$inc`` is atomic within a document
(https://www.mongodb.com/docs/manual/reference/operator/update/inc/), and two racing upserts
of a new key do not make two documents: the unique key refuses the second insert and the
server retries it as an update, since the filter is an equality match on every field of that
key (https://www.mongodb.com/docs/manual/reference/method/db.collection.updateOne/, "Upsert
with Duplicate Values").

The roll-up is written right after the conditional update that completes the stage (Mongo has
no transaction across the two documents here): a crash between the two loses that stage's
increment, never counts it twice; ``memoryctl migrate --rebuild-rollups`` derives them again.
"""

from __future__ import annotations

from collections.abc import Sequence

from pymongo import UpdateOne

from pipeline.store.mongo.codec import from_doc, unescape_keys
from pipeline.store.mongo.parts import MongoRepository
from pipeline.store.ports.rollups import (
    Increment, RollupStore, cost_row_of, day_of, fold, increments, selection,
)
from pipeline.store.ports.stats import CostRow
from schemas.documents import UsageRecord

ROLLUPS = "usage_rollups"
KEY = ("agent_id", "scope", "scope_id", "day", "stage", "model")


def _update(inc: Increment) -> UpdateOne:
    return UpdateOne(
        dict(zip(KEY, inc.key)),
        {"$inc": {"calls": inc.calls, "input_tokens": inc.input_tokens, "output_tokens": inc.output_tokens,
                  "usd": inc.usd, "unpriced": inc.unpriced},
         "$setOnInsert": {"kind": inc.kind, "provider": inc.provider, "price": inc.price},
         "$addToSet": {"snapshots": {"$each": list(inc.snapshots)}}},
        upsert=True)


class MongoRollups(MongoRepository, RollupStore):
    """``rollup_rows`` and ``rebuild_rollups``: a repository of ``MongoStore`` (``self.col``)."""

    def add_rollups(self, found: Sequence[Increment]) -> None:
        if found:
            self.col(ROLLUPS).bulk_write([_update(inc) for inc in found], ordered=False)

    def record_rollups(self, record: UsageRecord) -> list[Increment]:
        """What a usage record adds: under its run's users when its run is stored."""
        run = self.col("runs").find_one({"_id": record.run_id}, {"user_ids": 1}) if record.run_id else None
        users = (run or {}).get("user_ids") or []
        return increments(record.agent_id, record.session_id, users, record.stage, day_of(record.at), record.by_model)

    def rollup_rows(
        self, agent_id: str | None, *, user_id: str | None = None, session_id: str | None = None,
        since_day: str | None = None, until_day: str | None = None, all_time: bool = False,
    ) -> list[CostRow]:
        chosen = selection(agent_id, user_id, session_id, since_day, until_day, all_time)
        match: dict = dict(chosen.equal)
        if chosen.days is not None:
            match["day"] = {"$gte": chosen.days[0], "$lt": chosen.days[1]}
        docs = self.col(ROLLUPS).aggregate([
            {"$match": match},
            {"$group": {"_id": {"stage": "$stage", "day": "$day", "model": "$model"},
                        "kind": {"$first": "$kind"}, "provider": {"$first": "$provider"},
                        "price": {"$first": "$price"}, "calls": {"$sum": "$calls"},
                        "input_tokens": {"$sum": "$input_tokens"}, "output_tokens": {"$sum": "$output_tokens"},
                        "usd": {"$sum": "$usd"}, "unpriced": {"$sum": "$unpriced"},
                        "snapshots": {"$push": "$snapshots"}}},
        ])
        rows = [cost_row_of(d["_id"]["stage"], d["_id"]["day"], d["_id"]["model"], d.get("kind"), d.get("provider"),
                            d.get("price"), d["calls"], d["input_tokens"], d["output_tokens"], d["usd"], d["unpriced"],
                            [s for names in d.get("snapshots") or () for s in names or ()]) for d in docs]
        return sorted(rows, key=lambda r: (r.stage, r.day, r.model))

    def rebuild_rollups(self) -> int:
        found: list[Increment] = []
        for doc in self.col("runs").aggregate([
            {"$project": {"agent_id": 1, "session_id": 1, "user_ids": 1, "created_at": 1,
                          "stage": {"$objectToArray": "$stages"}}},
            {"$unwind": "$stage"},
            {"$project": {"agent_id": 1, "session_id": 1, "user_ids": 1, "stage": "$stage.k",
                          "at": {"$ifNull": ["$stage.v.finished_at", {"$ifNull": ["$stage.v.started_at", "$created_at"]}]},
                          "by_model": "$stage.v.usage.by_model"}},
        ]):
            by_model = unescape_keys(doc.get("by_model") or {})
            stage = unescape_keys({doc["stage"]: 0}).popitem()[0]
            found += increments(doc["agent_id"], doc.get("session_id"), doc.get("user_ids") or [], stage,
                                day_of(doc["at"]), by_model)
        for doc in self.col("usage").find({}):
            found += self.record_rollups(from_doc(UsageRecord, unescape_keys(doc)))
        rows = fold(found)
        self.col(ROLLUPS).delete_many({})
        self.add_rollups(rows)
        return len(rows)
