"""Mongo store, access control: API keys, audit log, jobs, user memory switches (the
``AccessStore`` port). A repository of ``MongoStore``. Keys are found by the unique index on ``digest``;
a switch is one document per (agent, user), keyed by both."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pymongo import DESCENDING, ReturnDocument

from pipeline.store import _common as c
from pipeline.store.mongo.codec import DuplicateKeyError, from_doc, to_doc
from pipeline.store.mongo.parts import MongoRepository
from pipeline.store.ports.access import AccessStore
from schemas.access import ApiKey, AuditEntry, Job

API_KEYS, AUDIT, JOBS, USER_SWITCHES = "api_keys", "audit", "jobs", "user_switches"
_IN_CHUNK = 500


class MongoAccess(MongoRepository, AccessStore):

    # ------------------------------------------------------------------ keys ---------------
    def put_api_key(self, key: ApiKey) -> None:
        try:
            self.col(API_KEYS).insert_one(to_doc(key, key.key_id))
        except DuplicateKeyError as exc:
            raise ValueError(f"a key with id {key.key_id} or the same secret exists") from exc

    def find_api_key(self, digest: str) -> ApiKey | None:
        return from_doc(ApiKey, self.col(API_KEYS).find_one({"digest": digest}))

    def list_api_keys(self) -> list[ApiKey]:
        return [from_doc(ApiKey, d) for d in self.col(API_KEYS).find({}, sort=[("created_at", 1), ("_id", 1)])]

    def revoke_api_key(self, key_id: str, now: datetime) -> ApiKey | None:
        # only a live key is stamped: a second revoke keeps the first time
        self.col(API_KEYS).update_one({"_id": key_id, "revoked_at": None}, {"$set": {"revoked_at": c.utc(now)}})
        return from_doc(ApiKey, self.col(API_KEYS).find_one({"_id": key_id}))

    # ------------------------------------------------------------------ audit --------------
    def record_audit(self, entry: AuditEntry) -> None:
        self.col(AUDIT).replace_one({"_id": entry.audit_id}, to_doc(entry, entry.audit_id), upsert=True)

    def list_audit(self, *, since: datetime | None = None, action: str | None = None,
                   limit: int = 100) -> list[AuditEntry]:
        query: dict = {}
        if since is not None:
            query["at"] = {"$gte": c.utc(since)}
        if action is not None:
            query["action"] = action
        docs = self.col(AUDIT).find(query, sort=[("at", DESCENDING), ("_id", DESCENDING)], limit=limit)
        return [from_doc(AuditEntry, d) for d in docs]

    # ------------------------------------------------------------------ jobs ---------------
    def put_job(self, job: Job) -> None:
        self.col(JOBS).replace_one({"_id": job.job_id}, to_doc(job, job.job_id), upsert=True)

    def get_job(self, job_id: str) -> Job | None:
        return from_doc(Job, self.col(JOBS).find_one({"_id": job_id}))

    # ------------------------------------------------------------------ user switch --------
    def set_user_memory(self, agent_id: str, user_id: str, enabled: bool, now: datetime) -> None:
        self.col(USER_SWITCHES).find_one_and_update(
            {"agent_id": agent_id, "user_id": user_id},
            {"$set": {"enabled": bool(enabled), "updated_at": c.utc(now)}},
            upsert=True, return_document=ReturnDocument.AFTER,
        )

    def user_memory_off(self, agent_id: str, user_ids: Sequence[str]) -> set[str]:
        ids = list(dict.fromkeys(u for u in user_ids if u))
        off: set[str] = set()
        for i in range(0, len(ids), _IN_CHUNK):
            docs = self.col(USER_SWITCHES).find(
                {"agent_id": agent_id, "user_id": {"$in": ids[i:i + _IN_CHUNK]}, "enabled": False}, {"user_id": 1},
            )
            off.update(d["user_id"] for d in docs)
        return off

    def forget_user_switches(self, user_id: str, agent_id: str | None = None, *, dry_run: bool = False) -> int:
        query = {"user_id": user_id} if agent_id is None else {"user_id": user_id, "agent_id": agent_id}
        if dry_run:
            return self.col(USER_SWITCHES).count_documents(query)
        return self.col(USER_SWITCHES).delete_many(query).deleted_count
