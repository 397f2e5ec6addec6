"""Mongo store, provenance queries (design §11 "Provenance and erasure"): what rests on one user,
each query served by an index of ``indexes.INDEXES`` (multikey on the id arrays), so that its
cost follows the user's data, not the store's. A rejected event keeps the strings of id length
of its raw payload in ``_ids`` (multikey-indexed), or ``_unparsed`` when the payload is not
JSON: only those are read whole. Events stored before ``_ids`` get it from
``backfill_rejected_ids`` (``memoryctl migrate``), and are read whole until then."""

from __future__ import annotations

from collections.abc import Iterator

from pipeline.footprint import Footprint, Resting
from pipeline.store import _common as c
from pipeline import withdrawal as w
from pipeline.store.mongo.codec import from_doc, to_doc
from pipeline.store.mongo.facts import LABELS, SEARCH_TEXT
from pipeline.store.mongo.parts import MongoRepository
from pipeline.store.mongo.reflections import OLDEST
from pipeline.store.mongo.runs import run_from
from pipeline.store.ports.provenance import ProvenanceStore
from pipeline.user_ids import raw_id_candidates, raw_names_user
from schemas.documents import ConsolidatedBlob, Fact, Reflection, StoredMessage, scope_key

IDS, UNPARSED = "_ids", "_unparsed"
# a user scope key, as a prefix regex (Mongo's rule: an anchored, case-sensitive prefix regex
# can use an index; a negation cannot, so it only filters what the other fields matched)
_USER_SCOPE = {"$regex": "^user:"}


def rejected_ids_fields(raw: str) -> dict:
    """The index fields of a rejected event with ``raw`` as its payload."""
    found = raw_id_candidates(raw)
    return {UNPARSED: True, IDS: []} if found is None else {IDS: found}


def _scoped(agent_id: str | None) -> dict:
    return {"agent_id": agent_id} if agent_id else {}


class MongoProvenance(MongoRepository, ProvenanceStore):
    """The provenance port of ``MongoStore``: a repository on its collections."""

    def resting_on(self, user_id: str, agent_id: str | None = None) -> Resting:
        key = scope_key("user", user_id=user_id)
        query = {"$or": [{"source_user_ids": user_id, **_scoped(agent_id)}, {"scope_key": key, **_scoped(agent_id)}]}
        return Resting(facts=[from_doc(Fact, d) for d in self.col("facts").find(query)],
                       reflections=[from_doc(Reflection, d) for d in self.col("reflections").find(query)])

    def unattributed(self, agent_id: str | None = None) -> Resting:
        query = {"source_user_ids": {"$in": [[], None]}, **_scoped(agent_id)}
        keep = lambda d: not str(d.get("scope_key") or "").startswith("user:")  # noqa: E731
        return Resting(facts=[from_doc(Fact, d) for d in self.col("facts").find(query) if keep(d)],
                       reflections=[from_doc(Reflection, d) for d in self.col("reflections").find(query) if keep(d)])

    def reflection_ids(self, agent_id: str, scope_key: str, *, absorbed_only: bool = False) -> list[str]:
        query: dict = {"agent_id": agent_id, "scope_key": scope_key}
        if absorbed_only:
            query["absorbed"] = True
        found = self.col("reflections").find(query, projection={"_id": 1}, sort=OLDEST)
        return [d["_id"] for d in found]

    def absorbed_from_others(self, agent_id: str, scope_key: str, user_id: str) -> bool:
        # $elemMatch on an array of strings matches when one element meets every condition:
        # here, one source user who is not ``user_id`` ("Array of scalars",
        # https://www.mongodb.com/docs/manual/reference/operator/query/elemMatch/)
        return self.col("reflections").find_one(
            {"agent_id": agent_id, "scope_key": scope_key, "absorbed": True,
             "source_user_ids": {"$elemMatch": {"$ne": user_id}}}, projection={"_id": 1}) is not None

    def unexplained_blobs(self, agent_id: str | None = None) -> list[ConsolidatedBlob]:
        found = self.col("consolidated").find({"last_run_id": None, **_scoped(agent_id)})
        blobs = [from_doc(ConsolidatedBlob, d) for d in found if not str(d.get("scope_key")).startswith("user:")]
        return [b for b in blobs if b.consolidated_content.strip() and not b.absorbing_ids]

    def own_blobs(self, user_id: str, agent_id: str | None = None) -> list[ConsolidatedBlob]:
        found = self.col("consolidated").find({"scope_key": scope_key("user", user_id=user_id), **_scoped(agent_id)},
                                              sort=[("agent_id", 1)])
        return [from_doc(ConsolidatedBlob, d) for d in found]

    def footprint(self, user_id: str, agent_id: str | None = None) -> Footprint:
        col, scoped, key = self.col, _scoped(agent_id), scope_key("user", user_id=user_id)
        found = {
            "messages.sender_id": col("messages").count_documents({"sender_id": user_id, **scoped}),
            "messages.session_users": col("messages").count_documents({"session_users": user_id, **scoped}),
            "sessions.users": col("sessions").count_documents({"users": user_id, **scoped}),
            "runs.user_ids": col("runs").count_documents({"user_ids": user_id, **scoped}),
            "facts.source_user_ids": col("facts").count_documents({"source_user_ids": user_id, **scoped}),
            "reflections.source_user_ids": col("reflections").count_documents({"source_user_ids": user_id, **scoped}),
            "contexts.user_id": col(c.CONTEXTS).count_documents({"user_id": user_id, **scoped}),
            "rejected.raw": len(self.rejected_naming(user_id, agent_id)),
        }
        for name in ("facts", "reflections", "consolidated", "scope_versions"):
            found[f"{name}.scope_key"] = col(name).count_documents({"scope_key": key, **scoped})
        # leases are held only while a merge runs: a handful, whatever the store's size
        leases = [d["_id"] for d in col(c.LEASES).find({}, {"_id": 1})]
        return Footprint.of(found, leases, user_id, agent_id)

    def rejected_naming(self, user_id: str, agent_id: str | None = None) -> list[str]:
        owners = {"agent_id": {"$in": [agent_id, None]}} if agent_id else {}
        wanted = [user_id, scope_key("user", user_id=user_id)]
        found = [d["_id"] for d in self.col("rejected").find({IDS: {"$in": wanted}, **owners}, {"_id": 1})]
        # payloads that are not JSON, and events stored before ``_ids``: read whole
        for d in self.col("rejected").find({"$or": [{UNPARSED: True, **owners}, {IDS: None, **owners}]},
                                           {"raw": 1}):
            if raw_names_user(d.get("raw") or "", user_id):
                found.append(d["_id"])
        return list(dict.fromkeys(found))

    def user_messages(self, user_id: str, agent_id: str | None = None) -> Iterator[StoredMessage]:
        for d in self.col("messages").find({"sender_id": user_id, **_scoped(agent_id)}, sort=[("_id", 1)]):
            yield from_doc(StoredMessage, d)

    def user_runs(self, user_id: str, agent_id: str | None = None):
        return [run_from(d) for d in self.col("runs").find({"user_ids": user_id, **_scoped(agent_id)},
                                                           sort=[("created_at", 1)])]

    def backfill_rejected_ids(self) -> int:
        """Give ``_ids`` to rejected events stored before it; returns how many were given it."""
        done = 0
        for d in self.col("rejected").find({IDS: None}, {"raw": 1}):
            self.col("rejected").update_one({"_id": d["_id"]}, {"$set": rejected_ids_fields(d.get("raw") or "")})
            done += 1
        return done

    def set_item_sources(self, kind: str, item_id: str, user_ids: list[str], message_ids: list[str]) -> bool:
        if kind not in ("facts", "reflections"):
            raise ValueError(f"kind must be facts or reflections, got {kind!r}")
        col = self.col(kind)
        changed = col.update_one({"_id": item_id, "source_user_ids": {"$in": [[], None]}},
                                 {"$set": {"source_user_ids": list(user_ids)}}).modified_count > 0
        if changed:
            col.update_one({"_id": item_id, "source_message_ids": {"$in": [[], None]}},
                           {"$set": {"source_message_ids": list(message_ids)}})
        return changed

    def withdraw_user(self, withdrawal: w.Withdrawal) -> Fact | Reflection | None:
        facts = withdrawal.kind == "facts"
        model, col = (Fact, self.col("facts")) if facts else (Reflection, self.col("reflections"))
        item = from_doc(model, col.find_one({"_id": withdrawal.item_id}))
        if item is None or not w.applies(item, withdrawal):
            return None
        updated = w.withdrawn(item, withdrawal)
        doc = to_doc(updated)
        fields = {k: doc[k] for k in ("source_user_ids", "source_message_ids", "history")}
        # compare and set on what ``applies`` read: a fact's every change moves its version or
        # retires it; a reflection's edit changes its text, a consolidation absorbs it
        guard = ({"version": item.version, "retired_at": None} if facts else {"absorbed": False, "content": item.content})
        if facts:
            fields.update(source_text=None, metadata=doc["metadata"], **{SEARCH_TEXT: updated.search_text,
                                                                        LABELS: updated.labels})
        won = col.update_one({"_id": withdrawal.item_id, "source_user_ids": withdrawal.user_id, **guard},
                             {"$set": fields})
        return updated if won.matched_count else None
