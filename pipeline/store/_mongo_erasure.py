"""Mongo store, erasure and audit: ``forget_user`` and ``dump_all``. Mixed into ``MongoStore``."""

from __future__ import annotations

import re

from pipeline.erasure import Plan
from pipeline.names import COLLECTIONS
from pipeline.store import _common as c
from pipeline.store._mongo_codec import escape_keys, to_doc
from pipeline.store._mongo_runs import run_from
from pipeline.user_ids import LEASE_PREFIX, raw_names_user
from schemas.documents import scope_key

_ALL = (*COLLECTIONS, c.LEASES, c.CONTEXTS)


class MongoErasureMixin:
    def _humans(self, session_id: str) -> set[str | None]:
        """Every human of a session: its user list and the senders of its user turns."""
        doc = self.col("sessions").find_one({"_id": session_id}, {"users": 1})
        humans = set(doc.get("users", [])) if doc else set()
        humans.update(self.col("messages").distinct("sender_id", {"session_id": session_id, "role": "user"}))
        return humans

    def forget_user(self, user_id: str, agent_id: str | None = None) -> dict[str, int]:
        scoped = {"agent_id": agent_id} if agent_id else {}
        user_key = scope_key("user", user_id=user_id)
        col = self.col
        sessions: dict[str, str] = {
            d["_id"]: d["agent_id"] for d in col("sessions").find({"users": user_id, **scoped}, {"agent_id": 1})}
        for d in col("messages").find({"sender_id": user_id, **scoped}, {"session_id": 1, "agent_id": 1}):
            sessions[d["session_id"]] = d["agent_id"]
        sids = list(sessions)
        # One-to-one sessions go whole; group sessions keep what the others said and formed.
        solo = {sid: agent for sid, agent in sessions.items() if c.sole_human(user_id, self._humans(sid))}
        group = [sid for sid in sids if sid not in solo]
        counts: dict[str, int] = {}

        counts["facts"] = col("facts").delete_many({"scope_key": user_key, **scoped}).deleted_count
        for name in ("reflections", "consolidated"):
            counts[name] = col(name).delete_many({"$or": [
                {"scope_key": user_key, **scoped},
                *({"scope_key": scope_key("session", session_id=sid), "agent_id": agent} for sid, agent in solo.items()),
            ]}).deleted_count

        removed = col("messages").delete_many({"sender_id": user_id, **scoped}).deleted_count
        removed += col("messages").delete_many({"session_id": {"$in": list(solo)}}).deleted_count
        removed += col("messages").update_many(
            {"session_id": {"$in": group}, "session_users": user_id}, {"$pull": {"session_users": user_id}},
        ).matched_count
        counts["messages"] = removed

        # Runs that name the user quote them: finished ones go, and so does every run of a
        # one-to-one session; an unfinished run of a group session is emptied and failed, so
        # its range is formed again for the others.
        in_flight = list(c.ACTIVE_RUN_STATUSES)
        runs = col("runs").delete_many({"$or": [
            {"session_id": {"$in": list(solo)}, "status": {"$nin": in_flight}},
            {"user_ids": user_id, "status": "done"}], **scoped}).deleted_count
        for doc in col("runs").find({"$or": [{"user_ids": user_id}, {"session_id": {"$in": list(solo)}}], **scoped}):
            run = run_from(doc)
            col("sessions").update_one({"_id": run.session_id, "active_run_id": run.run_id},
                                       {"$set": {"active_run_id": None, "lease_expires_at": None}})
            forgotten = c.forgotten_from_run(run, user_id, solo=run.session_id in solo)
            scrubbed = escape_keys(to_doc(forgotten, run.run_id))
            if doc.get("_claim_pending"):
                scrubbed["_claim_pending"] = True  # still for reopen_run to adopt or drop
            runs += col("runs").replace_one({"_id": run.run_id, "status": {"$ne": "done"}}, scrubbed).matched_count
        counts["runs"] = runs

        doomed = []
        for d in col("rejected").find({}, {"agent_id": 1, "raw": 1}):
            if agent_id is not None and d.get("agent_id") not in (None, agent_id):
                continue
            if raw_names_user(d.get("raw", ""), user_id):
                doomed.append(d["_id"])
        counts["rejected"] = col("rejected").delete_many({"_id": {"$in": doomed}}).deleted_count if doomed else 0

        counts["contexts"] = col(c.CONTEXTS).delete_many(
            {"$or": [{"user_id": user_id, **scoped}, {"session_id": {"$in": sids}}]}).deleted_count
        # ``recent`` holds event ids, which a platform may derive from user ids: it only
        # serves to complete an interrupted ingest, so it is cleared with the user's data.
        # In a group session only the entries that name the user go: the others may still be
        # needed to complete an interrupted ingest of someone else's message.
        counts["sessions"] = col("sessions").update_many(
            {"_id": {"$in": list(solo)}}, {"$pull": {"users": user_id}, "$set": {"recent": []}}).matched_count
        counts["sessions"] += col("sessions").update_many(
            {"_id": {"$in": group}},
            {"$pull": {"users": user_id, "recent": {"e": {"$regex": re.escape(user_id)}}}}).matched_count

        # The stamp of the user's scope names the user: drop it, and move the agent and
        # session stamps instead so that every cache built over the erased data is stale.
        stamped = {d["agent_id"] for d in col("scope_versions").find({"scope_key": user_key, **scoped}, {"agent_id": 1})}
        counts["scope_versions"] = col("scope_versions").delete_many({"scope_key": user_key, **scoped}).deleted_count
        agents = ({agent_id} if agent_id else stamped) | set(sessions.values())
        for agent in agents:
            keys = ["agent"] + [scope_key("session", session_id=s) for s, a in sessions.items() if a == agent]
            self.bump_scope_versions(agent, keys)
        # a consolidation lease of the user's scope: consolidate:<agent>:user:<id>, exactly
        lease = f"^{re.escape(LEASE_PREFIX + agent_id) if agent_id else re.escape(LEASE_PREFIX) + '.*'}:{re.escape(user_key)}$"
        counts["leases"] = col(c.LEASES).delete_many({"_id": {"$regex": lease}}).deleted_count
        return counts

    def erase_memory(self, plan: Plan) -> None:
        self.col("facts").delete_many({"_id": {"$in": plan.fact_ids}})
        self.col("reflections").delete_many({"_id": {"$in": plan.reflection_ids}})
        if plan.drop_blobs:
            self.col("consolidated").delete_many(
                {"$or": [{"agent_id": agent, "scope_key": key} for agent, key in plan.drop_blobs]})
        for agent, keys in plan.changed_keys().items():
            self.bump_scope_versions(agent, keys)

    def dump_all(self) -> dict[str, list[dict]]:
        out: dict[str, list[dict]] = {}
        for name in _ALL:
            docs = []
            for d in self.col(name).find({}):
                d["_id"] = str(d["_id"])
                docs.append(d)
            out[name] = docs
        return out
