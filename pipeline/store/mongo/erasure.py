"""Mongo store, erasure and audit: ``forget_user``, ``erase_memory`` and ``dump_all`` (the
``AdminStore`` port; the store class adds its lifecycle). A repository of ``MongoStore``."""

from __future__ import annotations

import re

from pipeline import erasure
from pipeline.erasure import Plan
from pipeline.names import COLLECTIONS
from pipeline.store import _common as c
from pipeline.store.mongo.codec import escape_keys, to_doc
from pipeline.store.mongo.parts import MongoRepository
from pipeline.store.mongo.rollups import ROLLUPS
from pipeline.store.mongo.runs import run_from
from pipeline.store.ports.admin import AdminStore
from schemas.documents import scope_key

_ALL = (*COLLECTIONS, c.LEASES, c.CONTEXTS, "webhook_subscriptions", "webhook_deliveries")


class MongoErasure(MongoRepository, AdminStore):
    def _humans(self, session_id: str) -> set[str | None]:
        """Every human of a session: its user list and the senders of its user turns."""
        doc = self.col("sessions").find_one({"_id": session_id}, {"users": 1})
        humans = set(doc.get("users", [])) if doc else set()
        humans.update(self.col("messages").distinct("sender_id", {"session_id": session_id, "role": "user"}))
        return humans

    def _user_data(self, user_id: str, scoped: dict) -> erasure.UserData:
        """What ``pipeline.erasure.forget_plan`` decides on, read from the collections."""
        col = self.col
        sessions: dict[str, str] = {
            d["_id"]: d["agent_id"] for d in col("sessions").find({"users": user_id, **scoped}, {"agent_id": 1})}
        for d in col("messages").find({"sender_id": user_id, **scoped}, {"session_id": 1, "agent_id": 1}):
            sessions[d["session_id"]] = d["agent_id"]
        runs = col("runs").find({"$or": [{"user_ids": user_id}, {"session_id": {"$in": list(sessions)}}], **scoped})
        return erasure.UserData(
            sessions=sessions, humans={sid: self._humans(sid) for sid in sessions},
            runs=[run_from(d) for d in runs],
            rejected=[(d["_id"], d.get("agent_id"), d.get("raw", "")) for d in col("rejected").find(
                {"_id": {"$in": self.parts.provenance.rejected_naming(user_id, scoped.get("agent_id"))}}, {"agent_id": 1, "raw": 1})],
            stamped=[d["agent_id"] for d in col("scope_versions").find(
                {"scope_key": scope_key("user", user_id=user_id), **scoped}, {"agent_id": 1})],
            leases=[d["_id"] for d in col(c.LEASES).find({}, {"_id": 1})],
        )

    def user_data(self, user_id: str, agent_id: str | None = None) -> erasure.UserData:
        return self._user_data(user_id, {"agent_id": agent_id} if agent_id else {})

    def forget_user(self, user_id: str, agent_id: str | None = None, *, dry_run: bool = False) -> dict[str, int]:
        scoped = {"agent_id": agent_id} if agent_id else {}
        col = self.col
        plan = erasure.forget_plan(user_id, agent_id, self._user_data(user_id, scoped))
        solo, group, user_key = list(plan.solo), plan.group, plan.user_key
        # a dry run counts what each write's filter matches (the filters never overlap, so
        # the counts are those of the writes): the plan an operator reads is the result
        def delete(name: str, query: dict) -> int:
            return col(name).count_documents(query) if dry_run else col(name).delete_many(query).deleted_count

        def update(name: str, query: dict, change: dict) -> int:
            return col(name).count_documents(query) if dry_run else col(name).update_many(query, change).matched_count

        counts: dict[str, int] = {"facts": delete("facts", {"scope_key": user_key, **scoped})}
        for name in ("reflections", "consolidated"):
            counts[name] = delete(name, {"$or": [
                {"scope_key": user_key, **scoped},
                *({"scope_key": scope_key("session", session_id=sid), "agent_id": agent}
                  for sid, agent in plan.solo.items()),
            ]})
        others = {"sender_id": {"$ne": user_id}}  # the user's own messages are counted once, first
        counts["messages_deleted"] = delete("messages", {"sender_id": user_id, **scoped})
        counts["messages_deleted"] += delete("messages", {"session_id": {"$in": solo}, **others})
        counts["messages_rewritten"] = update(
            "messages", {"session_id": {"$in": group}, "session_users": user_id, **others},
            {"$pull": {"session_users": user_id}})
        counts.update(self._forget_runs(plan, dry_run, user_id, scoped))
        counts["rejected"] = delete("rejected", {"_id": {"$in": plan.rejected_ids}})
        counts["contexts"] = delete(
            c.CONTEXTS, {"$or": [{"user_id": user_id, **scoped}, {"session_id": {"$in": plan.session_ids}}]})
        counts["sessions_rewritten"] = col("sessions").count_documents({"_id": {"$in": plan.session_ids}, "users": user_id})
        # The stamp of the user's scope names the user: drop it, and move the agent and
        # session stamps instead so that every cache built over the erased data is stale.
        counts["scope_versions"] = delete("scope_versions", {"scope_key": user_key, **scoped})
        counts["leases"] = delete(c.LEASES, {"_id": {"$in": plan.leases}})
        if not dry_run:
            self._forget_sessions(user_id, solo, group)
            for agent, keys in plan.stamps.items():
                self.parts.leases.bump_scope_versions(agent, keys)
        return counts

    def _forget_runs(self, plan: erasure.ForgetPlan, dry_run: bool, user_id: str, scoped: dict) -> dict[str, int]:
        """Runs quote the user: see ``pipeline.erasure.forget_plan`` for which go and which stay
        emptied. What they spent stays, anonymous (first: a crash after it only records it again)."""
        col = self.col
        if dry_run:
            return {"runs_deleted": col("runs").count_documents({"_id": {"$in": plan.delete_runs}}),
                    "runs_rewritten": col("runs").count_documents(
                        {"_id": {"$in": [r.run_id for r in plan.rewrite_runs]}, "status": {"$ne": "done"}})}
        # The agent's roll-ups keep it too; the user's own, and their one-to-one sessions', go.
        for record in plan.usage:
            self.parts.stats.keep_usage_record(record)
        col(ROLLUPS).delete_many({"scope": "user", "scope_id": user_id, **scoped})
        for sid, agent in plan.solo.items():
            col(ROLLUPS).delete_many({"scope": "session", "scope_id": sid, "agent_id": agent})
        deleted = col("runs").delete_many({"_id": {"$in": plan.delete_runs}}).deleted_count
        rewritten = 0
        for run in plan.rewrite_runs:
            col("sessions").update_one({"_id": run.session_id, "active_run_id": run.run_id},
                                       {"$set": {"active_run_id": None, "lease_expires_at": None}})
            scrubbed = escape_keys(to_doc(run, run.run_id))
            if col("runs").find_one({"_id": run.run_id, "_claim_pending": True}, {"_id": 1}):
                scrubbed["_claim_pending"] = True  # still for reopen_run to adopt or drop
            rewritten += col("runs").replace_one({"_id": run.run_id, "status": {"$ne": "done"}}, scrubbed).matched_count
        return {"runs_deleted": deleted, "runs_rewritten": rewritten}

    def _forget_sessions(self, user_id: str, solo: list[str], group: list[str]) -> None:
        # ``recent`` holds event ids, which a platform may derive from user ids: it only
        # serves to complete an interrupted ingest, so it is cleared with the user's data.
        # In a group session only the entries that name the user go: the others may still be
        # needed to complete an interrupted ingest of someone else's message.
        self.col("sessions").update_many(
            {"_id": {"$in": solo}}, {"$pull": {"users": user_id}, "$set": {"recent": []}})
        self.col("sessions").update_many(
            {"_id": {"$in": group}}, {"$pull": {"users": user_id, "recent": {"e": {"$regex": re.escape(user_id)}}}})

    def erase_memory(self, plan: Plan) -> None:
        self.col("facts").delete_many({"_id": {"$in": plan.fact_ids}})
        self.col("reflections").delete_many({"_id": {"$in": plan.reflection_ids}})
        if plan.drop_blobs:
            self.col("consolidated").delete_many(
                {"$or": [{"agent_id": agent, "scope_key": key} for agent, key in plan.drop_blobs]})
        for agent, keys in plan.changed_keys().items():
            self.parts.leases.bump_scope_versions(agent, keys)
            # a cached context of this agent may quote a removed item: stale, never served
            # again, but still a stored copy of what was erased
            self.col(c.CONTEXTS).delete_many({"agent_id": agent})

    def dump_all(self) -> dict[str, list[dict]]:
        out: dict[str, list[dict]] = {}
        for name in _ALL:
            docs = []
            for d in self.col(name).find({}):
                d["_id"] = str(d["_id"])
                docs.append(d)
            out[name] = docs
        return out
