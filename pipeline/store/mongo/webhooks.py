"""Mongo store, webhooks: subscriptions and deliveries (the ``WebhookStore`` port). A
repository of ``MongoStore``. A delivery is one document keyed by its id (an insert of a
queued id is a duplicate key: announcing twice queues once); the people it is about are the
array ``event.subjects``, indexed, so an erasure finds their deliveries (an equality match on
an array field matches any element: https://www.mongodb.com/docs/manual/tutorial/query-arrays/)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pymongo import ASCENDING, DESCENDING, ReturnDocument
from pymongo.errors import BulkWriteError

from pipeline.store import _common as c
from pipeline.store.mongo.codec import from_doc, to_doc
from pipeline.store.mongo.parts import MongoRepository
from pipeline.store.ports.webhooks import WebhookStore
from schemas.webhooks import DeliveryStatus, WebhookDelivery, WebhookSubscription

SUBSCRIPTIONS, DELIVERIES = "webhook_subscriptions", "webhook_deliveries"
_DUPLICATE_KEY = 11000   # the server's error code for a unique index violation


class MongoWebhooks(MongoRepository, WebhookStore):

    def put_subscription(self, sub: WebhookSubscription) -> None:
        self.col(SUBSCRIPTIONS).replace_one({"_id": sub.subscription_id}, to_doc(sub, sub.subscription_id), upsert=True)

    def get_subscription(self, subscription_id: str) -> WebhookSubscription | None:
        return from_doc(WebhookSubscription, self.col(SUBSCRIPTIONS).find_one({"_id": subscription_id}))

    def list_subscriptions(self, agent_id: str | None = None) -> list[WebhookSubscription]:
        query = {"agent_id": agent_id} if agent_id is not None else {}
        docs = self.col(SUBSCRIPTIONS).find(query, sort=[("created_at", ASCENDING), ("_id", ASCENDING)])
        return [from_doc(WebhookSubscription, d) for d in docs]

    def delete_subscription(self, subscription_id: str) -> int:
        gone = self.col(SUBSCRIPTIONS).delete_one({"_id": subscription_id}).deleted_count
        if not gone:
            return 0
        return gone + self.col(DELIVERIES).delete_many({"subscription_id": subscription_id}).deleted_count

    def add_deliveries(self, deliveries: Sequence[WebhookDelivery]) -> int:
        if not deliveries:
            return 0
        try:
            # unordered: every new one is inserted even when some are queued already
            return len(self.col(DELIVERIES).insert_many([to_doc(d, d.delivery_id) for d in deliveries],
                                                        ordered=False).inserted_ids)
        except BulkWriteError as exc:
            errors = exc.details.get("writeErrors", [])
            if any(e.get("code") != _DUPLICATE_KEY for e in errors):
                raise
            return exc.details.get("nInserted", 0)

    def get_delivery(self, delivery_id: str) -> WebhookDelivery | None:
        return from_doc(WebhookDelivery, self.col(DELIVERIES).find_one({"_id": delivery_id}))

    def list_deliveries(self, *, agent_id: str | None = None, subscription_id: str | None = None,
                        status: DeliveryStatus | None = None, limit: int = 100) -> list[WebhookDelivery]:
        query = {k: v for k, v in (("agent_id", agent_id), ("subscription_id", subscription_id),
                                   ("status", status)) if v is not None}
        docs = self.col(DELIVERIES).find(query, sort=[("created_at", DESCENDING), ("_id", DESCENDING)], limit=limit)
        return [from_doc(WebhookDelivery, d) for d in docs]

    def due_deliveries(self, now: datetime, limit: int = 100) -> list[str]:
        docs = self.col(DELIVERIES).find({"status": "pending", "next_attempt_at": {"$lte": c.utc(now)}}, {"_id": 1},
                                         sort=[("next_attempt_at", ASCENDING), ("_id", ASCENDING)], limit=limit)
        return [d["_id"] for d in docs]

    def claim_delivery(self, delivery_id: str, now: datetime, until: datetime) -> WebhookDelivery | None:
        doc = self.col(DELIVERIES).find_one_and_update(
            {"_id": delivery_id, "status": "pending", "next_attempt_at": {"$lte": c.utc(now)}},
            {"$set": {"next_attempt_at": c.utc(until)}}, return_document=ReturnDocument.AFTER)
        return from_doc(WebhookDelivery, doc)

    def save_delivery(self, delivery: WebhookDelivery) -> bool:
        return self.col(DELIVERIES).replace_one({"_id": delivery.delivery_id},
                                                to_doc(delivery, delivery.delivery_id)).matched_count == 1

    def forget_deliveries(self, user_id: str, agent_id: str | None = None, *, dry_run: bool = False) -> int:
        query = {"event.subjects": user_id, **({"agent_id": agent_id} if agent_id else {})}
        if dry_run:
            return self.col(DELIVERIES).count_documents(query)
        return self.col(DELIVERIES).delete_many(query).deleted_count
