"""Mongo store, ingest: agents' settings, messages, sessions and rejected events (the
``IngestStore`` port). A repository of ``MongoStore`` (``self.col``).

Ingest without a transaction (crash-safe: whatever reads the session next completes it):
1. insert the message *with* its seq, ``last_seq + 1`` of the session as read: the unique
   (``session_id``, ``seq``) key lets one message take a seq, and the unique ``event_id`` and
   (``session_id``, ``message_id``) keys reject duplicates;
2. count it: a compare-and-set on the session from ``last_seq = seq - 1`` to ``seq``, moving
   the counters.
The session never counts a seq whose message is not stored, so a claim (which covers up to
``last_seq``) never takes a seq it cannot read. A message stored but not counted yet (a crash
between 1 and 2, or an ingest still on its way) holds ``last_seq + 1``, and whoever meets it
counts it first: the next message's ingest (its insert hits that seq), a claim, or the
redelivery of the message itself. The call that stored a message reports it accepted; a
redelivery reports a duplicate.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pymongo import ASCENDING, DESCENDING, ReturnDocument

from pipeline.errors import InvalidInput
from pipeline.store import _common as c
from pipeline.store.mongo.codec import DuplicateKeyError, from_doc, to_doc
from pipeline.store.mongo.parts import CAS_ATTEMPTS, MongoRepository
from pipeline.store.mongo.provenance import rejected_ids_fields
from pipeline.store.ports.ingest import IngestOutcome, IngestStore, owned_by_another
from schemas.documents import AgentSettings, RejectedEvent, SessionState, StoredMessage

_A, _D = ASCENDING, DESCENDING


class MongoIngest(MongoRepository, IngestStore):
    def get_agent_settings(self, agent_id: str) -> AgentSettings:
        return from_doc(AgentSettings, self.col("agents").find_one({"_id": agent_id})) or AgentSettings(agent_id=agent_id)

    def put_agent_settings(self, settings: AgentSettings) -> None:
        self.col("agents").replace_one({"_id": settings.agent_id}, to_doc(settings, settings.agent_id), upsert=True)

    # ------------------------------------------------------------------ ingest -------------
    def ingest_message(self, message: StoredMessage, now: datetime) -> IngestOutcome:
        if self._session_owner(message) != message.agent_id:
            return IngestOutcome(status="rejected", seq=None, session=None, reason=owned_by_another(message.session_id))
        messages = self.col("messages")
        for _ in range(CAS_ATTEMPTS):
            before = self._session_for(message)
            stored = message.model_copy(update={"seq": before.last_seq + 1})
            try:
                messages.insert_one(to_doc(stored))
            except DuplicateKeyError:
                existing = messages.find_one({"event_id": message.event_id}) or messages.find_one(
                    {"session_id": message.session_id, "message_id": message.message_id})
                if existing is None:
                    # the seq is held by a message whose ingest has not counted it (yet): count it
                    self.count_uncounted(message.session_id)
                    continue
                if existing.get("seq") is None and not self._complete_legacy(existing):
                    continue  # an uncounted message of the former protocol, dropped: store this one
                return self._redelivered(from_doc(StoredMessage, existing))
            # The call that stores the message accepts it, whoever counts it.
            return IngestOutcome(status="accepted", seq=stored.seq, session=self._count(stored, before, now))
        raise RuntimeError(f"ingest: session {message.session_id!r} kept changing; gave up after {CAS_ATTEMPTS} tries")

    def _session_owner(self, message: StoredMessage) -> str:
        """The agent the message's session belongs to. The session document is created (with
        the agent of its first message) before any message of it is stored, and its agent never
        changes, so two agents racing on a new session id cannot both get a message into it."""
        sessions = self.col("sessions")
        doc = sessions.find_one({"_id": message.session_id}, {"agent_id": 1})
        if doc is None:
            try:
                sessions.insert_one(to_doc(c.new_session(message), message.session_id))
                return message.agent_id
            except DuplicateKeyError:
                doc = sessions.find_one({"_id": message.session_id}, {"agent_id": 1})
        # None: erased just now; the ingest creates it again for this message's agent
        return message.agent_id if doc is None else doc["agent_id"]

    def _session_for(self, message: StoredMessage) -> SessionState:
        """The message's session as it stands (created again if it was erased meanwhile)."""
        sessions = self.col("sessions")
        doc = sessions.find_one({"_id": message.session_id})
        if doc is None:
            try:
                sessions.insert_one(to_doc(c.new_session(message), message.session_id))
            except DuplicateKeyError:
                pass
            doc = sessions.find_one({"_id": message.session_id})
        return from_doc(SessionState, doc)

    def _count(self, message: StoredMessage, before: SessionState, now: datetime) -> SessionState:
        """Step 2 of the ingest: move the session over ``message`` (stored with seq
        ``last_seq + 1``) by a compare-and-set; the session after it. When another call counted
        it meanwhile (helping an interrupted ingest), the session as that call left it."""
        sessions = self.col("sessions")
        for _ in range(CAS_ATTEMPTS):
            after = c.apply_message(before, message, now)
            update: dict = {
                "$set": {"last_seq": after.last_seq, "last_activity_at": after.last_activity_at},
                "$inc": {"messages_since": 1, "tokens_since": float(message.weighted_tokens)},
                "$max": {"max_tier": after.max_tier},
            }
            if after.preview:
                update["$set"]["preview"] = True
            if c.reopens(before, message):
                update["$set"].update(ended_at=None, ended_history=after.ended_history)
            humans = c.humans_of(message)
            if humans:
                update["$addToSet"] = {"users": {"$each": humans}}
            new = sessions.find_one_and_update(
                {"_id": message.session_id, "last_seq": message.seq - 1, "ended_at": before.ended_at},
                update, return_document=ReturnDocument.AFTER,
            )
            if new is not None:
                return from_doc(SessionState, new)
            current = sessions.find_one({"_id": message.session_id})
            if current is None or current["last_seq"] >= message.seq:
                return from_doc(SessionState, current)  # counted by another call (or erased)
            before = from_doc(SessionState, current)  # ended or resumed meanwhile: count again
        raise RuntimeError(f"ingest: session {message.session_id!r} kept changing; gave up after {CAS_ATTEMPTS} tries")

    def count_uncounted(self, session_id: str) -> bool:
        """Count the message stored with seq ``last_seq + 1`` whose ingest stopped before
        counting it (a crash, or still on its way). True if there was one."""
        doc = self.col("sessions").find_one({"_id": session_id})
        if doc is None:
            return False
        found = self.col("messages").find_one({"session_id": session_id, "seq": doc["last_seq"] + 1})
        if found is None:
            return False
        uncounted = from_doc(StoredMessage, found)
        self._count(uncounted, from_doc(SessionState, doc), uncounted.ingested_at)
        return True

    def _redelivered(self, stored: StoredMessage) -> IngestOutcome:
        """A message stored before: a duplicate. If its ingest stopped before counting it, the
        redelivery completes that first."""
        session = self.get_session(stored.session_id)
        if session is not None and stored.seq is not None and stored.seq > session.last_seq:
            self._count(stored, session, stored.ingested_at)
        return IngestOutcome(status="duplicate", seq=None, session=self._count_duplicate(stored.session_id))

    def _complete_legacy(self, existing: dict) -> bool:
        """A message stored without a seq by the former three-step ingest (crashed before its
        last step). If its seq was counted (kept in the session's ``recent`` list) it gets it,
        True; otherwise it was never counted and is dropped so the redelivery stores it anew,
        False."""
        session = self.col("sessions").find_one({"_id": existing["session_id"]}) or {}
        for entry in session.get("recent", []):
            if entry["e"] == existing["event_id"]:
                self.col("messages").update_one({"_id": existing["_id"]}, {"$set": {"seq": entry["s"]}})
                existing["seq"] = entry["s"]
                return True
        self.col("messages").delete_one({"_id": existing["_id"], "seq": None})
        return False

    def _count_duplicate(self, session_id: str) -> SessionState:
        doc = self.col("sessions").find_one_and_update(
            {"_id": session_id}, {"$inc": {"duplicates": 1}}, return_document=ReturnDocument.AFTER)
        return from_doc(SessionState, doc)

    def record_rejection(self, rejected: RejectedEvent) -> None:
        doc = {**to_doc(rejected, rejected.rejection_id), **rejected_ids_fields(rejected.raw)}
        self.col("rejected").replace_one({"_id": rejected.rejection_id}, doc, upsert=True)

    def list_rejections(self, limit: int = 100) -> list[RejectedEvent]:
        docs = self.col("rejected").find({}, sort=[("received_at", _D), ("_id", _D)], limit=limit)
        return [from_doc(RejectedEvent, d) for d in docs]

    def delete_rejections(self, rejection_ids: Sequence[str]) -> int:
        return self.col("rejected").delete_many({"_id": {"$in": list(rejection_ids)}}).deleted_count

    def get_messages(self, session_id: str, seq_from: int, seq_to: int) -> list[StoredMessage]:
        docs = self.col("messages").find(
            {"session_id": session_id, "seq": {"$gte": seq_from, "$lte": seq_to}},
            sort=[("created_at", _A), ("seq", _A)],
        )
        return [from_doc(StoredMessage, d) for d in docs]

    def count_messages(self, session_id: str) -> int:
        return self.col("messages").count_documents({"session_id": session_id})

    # ------------------------------------------------------------------ sessions -----------
    def get_session(self, session_id: str) -> SessionState | None:
        return from_doc(SessionState, self.col("sessions").find_one({"_id": session_id}))

    def declare_session_users(self, session_id: str, agent_id: str, user_ids: Sequence[str]) -> SessionState:
        fresh = to_doc(SessionState(session_id=session_id, agent_id=agent_id), session_id)
        for key in ("_id", "agent_id", "users"):
            fresh.pop(key, None)  # _id and agent_id come from the filter, users from $addToSet
        try:
            # one upsert: $addToSet is the atomic set union; the filter on agent_id makes a session
            # of another agent miss, and the upsert's insert of its _id then fails on the key
            doc = self.col("sessions").find_one_and_update(
                {"_id": session_id, "agent_id": agent_id},
                {"$addToSet": {"users": {"$each": list(dict.fromkeys(user_ids))}}, "$setOnInsert": fresh},
                upsert=True, return_document=ReturnDocument.AFTER,
            )
        except DuplicateKeyError:
            raise InvalidInput("session_id", owned_by_another(session_id)) from None
        return from_doc(SessionState, doc)

    def mark_session_ended(self, session_id: str, now: datetime, agent_id: str | None = None) -> SessionState | None:
        sessions = self.col("sessions")
        query: dict = {"_id": session_id, "ended_at": None}
        if agent_id is not None:
            query["agent_id"] = agent_id  # a session's agent never changes: the filter is the check
        sessions.update_one(query, {"$set": {"ended_at": c.utc(now)}, "$push": {"ended_history": c.utc(now)}})
        session = self.get_session(session_id)
        if session is not None and agent_id is not None and session.agent_id != agent_id:
            raise InvalidInput("session_id", owned_by_another(session_id))
        return session

    def find_cold_sessions(self, idle_before: datetime, min_messages: int, limit: int) -> list[str]:
        docs = self.col("sessions").find(
            {"active_run_id": None, "last_activity_at": {"$lte": c.utc(idle_before)},
             "messages_since": {"$gte": max(1, min_messages)}},
            {"_id": 1}, sort=[("last_activity_at", _A)], limit=limit,
        )
        return [d["_id"] for d in docs]
