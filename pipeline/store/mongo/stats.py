"""The Mongo side of the statistics port (``ports.stats``): sums and counts in the server.

The sums are aggregation pipelines over the runs an index selects (``agent_created``,
``session_created``, ``users``) and over the usage records (``agent_at``,
``agent_session_at``, ``run``); only one document per stage, day and model comes back. Every
operator used is in MongoDB 5.0's aggregation language (``$objectToArray``, ``$dateToString``,
``$ifNull``, ``$cond``; https://www.mongodb.com/docs/manual/reference/operator/aggregation/).
Counts are ``count_documents`` on the reflections' ``agent_scope_buffer`` index.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pymongo import ASCENDING, DESCENDING

from pipeline.store import _common as c
from pipeline.store.mongo.codec import _aware, escape_keys, from_doc, to_doc, unescape_keys
from pipeline.store.mongo.parts import MongoRepository
from pipeline.store.ports.stats import CostRow, ReflectionCounts, StatsStore, merged, snapshots_of
from schemas.documents import UsageRecord

_MISSING_USD = {"$eq": [{"$ifNull": ["$model.v.usd", None]}, None]}


def _summed(stage: str, at: str) -> list[dict]:
    """The stages that sum ``model`` (``{k, v}`` of a per-model row) per stage, day and model."""
    return [
        {"$unwind": "$model"},
        {"$group": {
            "_id": {"stage": stage, "day": {"$dateToString": {"format": "%Y-%m-%d", "date": at}}, "model": "$model.k"},
            "kind": {"$first": "$model.v.kind"}, "provider": {"$first": "$model.v.provider"},
            "price": {"$first": "$model.v.price"}, "calls": {"$sum": "$model.v.calls"},
            "input_tokens": {"$sum": "$model.v.input_tokens"}, "output_tokens": {"$sum": "$model.v.output_tokens"},
            "usd": {"$sum": "$model.v.usd"}, "unpriced": {"$sum": {"$cond": [_MISSING_USD, 1, 0]}},
            "snapshots": {"$push": {"$ifNull": ["$model.v.snapshots", []]}},
        }},
    ]


def _row(doc: dict) -> CostRow:
    key = doc["_id"]
    unpriced = doc["unpriced"] > 0
    return CostRow(
        stage=unescape_keys({key["stage"]: 0}).popitem()[0], day=key["day"],
        model=unescape_keys({key["model"]: 0}).popitem()[0], kind=doc.get("kind") or "llm",
        provider=doc.get("provider") or "", price="unpriced" if unpriced else (doc.get("price") or "unpriced"),
        calls=int(doc["calls"]), input_tokens=int(doc["input_tokens"]), output_tokens=int(doc["output_tokens"]),
        usd=None if unpriced else round(float(doc["usd"]), 9),
        snapshots=snapshots_of(doc.get("snapshots") or ()),
    )


class MongoStats(MongoRepository, StatsStore):
    """Usage records, ``cost_rows`` and ``reflection_counts``: a repository of ``MongoStore``
    (``self.col``)."""

    def record_usage(self, record: UsageRecord) -> None:
        # model names hold dots ("gpt-6.1-sol"): escaped like every free-form map
        if self.keep_usage_record(record):  # rolled up once, as it is first kept
            self.parts.rollups.add_rollups(self.parts.rollups.record_rollups(record))

    def keep_usage_record(self, record: UsageRecord) -> bool:
        """Store a usage record (replacing one of its id), rolling nothing up: also what an
        erasure keeps of the runs it removes, whose spend is rolled up already. True when new."""
        doc = escape_keys(to_doc(record, record.usage_id))
        return self.col(c.USAGE).replace_one({"_id": record.usage_id}, doc, upsert=True).upserted_id is not None

    def list_usage(self, agent_id: str, since: datetime | None = None) -> list[UsageRecord]:
        query: dict = {"agent_id": agent_id}
        if since is not None:
            query["at"] = {"$gte": c.utc(since)}
        return [from_doc(UsageRecord, unescape_keys(d)) for d in self.col(c.USAGE).find(query, sort=[("at", ASCENDING)])]

    def cost_rows(
        self, agent_id: str, *, since: datetime | None = None, until: datetime | None = None,
        user_id: str | None = None, session_id: str | None = None,
    ) -> list[CostRow]:
        window: dict = {}
        if since is not None:
            window["$gte"] = c.utc(since)
        if until is not None:
            window["$lt"] = c.utc(until)
        runs: dict = {"agent_id": agent_id}
        if session_id is not None:
            runs["session_id"] = session_id
        if user_id is not None:
            runs["user_ids"] = user_id
        if window:
            runs["created_at"] = window
        docs = list(self.col("runs").aggregate([
            {"$match": runs},
            {"$project": {"created_at": 1, "stage": {"$objectToArray": "$stages"}}},
            {"$unwind": "$stage"},
            {"$project": {"stage": "$stage.k",
                          "at": {"$ifNull": ["$stage.v.finished_at", {"$ifNull": ["$stage.v.started_at", "$created_at"]}]},
                          "model": {"$objectToArray": {"$ifNull": ["$stage.v.usage.by_model", {}]}}}},
            *_summed("$stage", "$at"),
        ]))
        usage: dict = {"agent_id": agent_id}
        if session_id is not None:
            usage["session_id"] = session_id
        if user_id is not None:
            theirs = [d["_id"] for d in self.col("runs").find({"agent_id": agent_id, "user_ids": user_id}, {"_id": 1})]
            usage["run_id"] = {"$in": theirs}
        if window:
            usage["at"] = window
        docs += self.col(c.USAGE).aggregate([
            {"$match": usage},
            {"$project": {"stage": 1, "at": 1, "model": {"$objectToArray": "$by_model"}}},
            *_summed("$stage", "$at"),
        ])
        return merged([_row(d) for d in docs])

    def reflection_counts(self, agent_id: str, scope_keys: Sequence[str]) -> dict[str, ReflectionCounts]:
        col = self.col("reflections")
        out = {}
        for key in scope_keys:
            scope = {"agent_id": agent_id, "scope_key": key}
            unabsorbed = col.count_documents({**scope, "absorbed": False})
            absorbed = col.count_documents({**scope, "absorbed": True})
            # the newest of each part: the index's last entry under (agent, scope, absorbed)
            newest = [d["formed_at"] for flag in (False, True)
                      for d in col.find({**scope, "absorbed": flag}, {"formed_at": 1}, sort=[("formed_at", DESCENDING)], limit=1)]
            out[key] = ReflectionCounts(unabsorbed + absorbed, unabsorbed, _aware(max(newest)) if newest else None)
        return out
