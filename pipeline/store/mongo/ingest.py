"""The production store (design §7): MongoDB through pymongo, no transactions needed.

Atomicity comes from single-document conditional updates (``find_one_and_update`` with a
filter that states the precondition) and unique indexes (``DuplicateKeyError`` means "someone
else already did it"). Every query is plain MongoDB 7+/Atlas: no ``$where``, no JavaScript.

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

Claims: a run document is inserted first, marked ``_claim_pending``; then a compare-and-set
on the session (unchanged ``last_seq``/``claimed_through``, no holder) takes the range; then
the mark is removed. A crash in between leaves a pending run that ``reopen_run`` either
adopts (the session points at it) or deletes (it never got the range).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pymongo import ASCENDING, DESCENDING, ReturnDocument

from pipeline.errors import ConfigurationError, InvalidInput
from pipeline.store import _common as c
from pipeline.store._mongo_access import MongoAccessMixin
from pipeline.store._mongo_codec import DuplicateKeyError, escape_keys, from_doc, to_doc, unescape_keys
from pipeline.store._mongo_erasure import MongoErasureMixin
from pipeline.store._mongo_memory import LIVE, SEARCH_TEXT, MongoMemoryMixin
from pipeline.store._mongo_provenance import IDS, UNPARSED, MongoProvenanceMixin, rejected_ids_fields
from pipeline.store._mongo_runs import MongoRunsMixin
from pipeline.store._mongo_stats import MongoStatsMixin
from pipeline.store._mongo_unavailable import unavailable
from pipeline.store._unavailable import translate_errors
from pipeline.store.port import IngestOutcome, Store, owned_by_another
from pipeline.trigger import ClaimRule
from schemas.documents import AgentSettings, FormationRun, RejectedEvent, SessionState, StoredMessage, UsageRecord

CAS_ATTEMPTS = 200      # compare-and-set retries under contention before giving up

TIMEOUTS_MS = {"serverSelectionTimeoutMS": 10_000, "connectTimeoutMS": 10_000, "socketTimeoutMS": 30_000}

_A, _D = ASCENDING, DESCENDING
# (collection, [(field, direction)], name, unique)
INDEXES: tuple[tuple[str, list, str, bool], ...] = (
    ("messages", [("event_id", _A)], "event_id_unique", True),
    ("messages", [("session_id", _A), ("message_id", _A)], "session_message_unique", True),
    # unique: a seq is taken by storing the message with it (see the ingest above)
    ("messages", [("session_id", _A), ("seq", _A)], "session_seq", True),
    ("messages", [("sender_id", _A)], "sender", False),
    ("sessions", [("active_run_id", _A), ("last_activity_at", _A)], "cold", False),
    ("sessions", [("users", _A)], "users", False),
    ("runs", [("status", _A), ("lease_expires_at", _A)], "status_lease", False),
    ("runs", [("session_id", _A), ("created_at", _D)], "session_created", False),
    ("runs", [("agent_id", _A), ("created_at", _D)], "agent_created", False),
    ("runs", [("created_at", _D)], "created", False),
    ("runs", [("user_ids", _A)], "users", False),
    ("facts", [("agent_id", _A), ("scope_key", _A), ("hash", _A)], "agent_scope_hash_unique", True),
    ("facts", [("agent_id", _A), ("scope_key", _A), ("retired_at", _A), ("formed_at", _D)], "agent_scope_live_formed", False),
    ("facts", [("embedding_model", _A), ("_id", _A)], "embedding_model", False),
    # <Facts>: the latest changes of live facts (``recent_facts``)
    ("facts", [("agent_id", _A), ("scope_key", _A), ("retired_at", _A), ("updated_at", _D)],
     "agent_scope_live_updated", False),
    # dedup's recent facts (equality fields, then the range): ``recent_fact_ids``
    ("facts", [("agent_id", _A), ("scope_key", _A), ("embedding_model", _A), ("live", _A), ("formed_at", _D)],
     "agent_scope_model_live_formed", False),
    ("reflections", [("agent_id", _A), ("scope_key", _A), ("absorbed", _A), ("formed_at", _A)], "agent_scope_buffer", False),
    ("consolidated", [("agent_id", _A), ("scope_key", _A)], "agent_scope_unique", True),
    ("rejected", [("received_at", _D)], "received", False),
    (c.USAGE, [("agent_id", _A), ("at", _A)], "agent_at", False),
    # statistics (port_stats): a session's usage records, and those of a user's runs
    (c.USAGE, [("agent_id", _A), ("session_id", _A), ("at", _A)], "agent_session_at", False),
    (c.USAGE, [("run_id", _A)], "run", False),
    ("scope_versions", [("agent_id", _A), ("scope_key", _A)], "agent_scope_unique", True),
    ("contexts", [("session_id", _A), ("user_id", _A)], "session_user_unique", True),
    ("contexts", [("user_id", _A)], "user", False),
    # an erasure drops every cached context of an agent it changed (``erase_memory``)
    ("contexts", [("agent_id", _A)], "agent", False),
    # provenance queries (``_mongo_provenance``): what rests on one user, in any agent
    ("facts", [("source_user_ids", _A), ("agent_id", _A)], "source_users", False),
    ("reflections", [("source_user_ids", _A), ("agent_id", _A)], "source_users", False),
    ("facts", [("scope_key", _A), ("agent_id", _A)], "scope_key", False),
    ("reflections", [("scope_key", _A), ("agent_id", _A)], "scope_key", False),
    ("consolidated", [("scope_key", _A), ("agent_id", _A)], "scope_key", False),
    ("consolidated", [("last_run_id", _A), ("agent_id", _A)], "last_run", False),
    ("scope_versions", [("scope_key", _A), ("agent_id", _A)], "scope_key", False),
    ("messages", [("session_users", _A), ("agent_id", _A)], "session_users", False),
    ("messages", [("sender_id", _A), ("agent_id", _A)], "sender_agent", False),
    ("sessions", [("users", _A), ("agent_id", _A)], "users_agent", False),
    ("runs", [("user_ids", _A), ("agent_id", _A)], "users_agent", False),
    ("rejected", [(IDS, _A), ("agent_id", _A)], "ids", False),
    ("rejected", [(UNPARSED, _A)], "unparsed", False),
    # access control (``_mongo_access``)
    ("api_keys", [("digest", _A)], "digest_unique", True),
    ("audit", [("at", _D)], "at", False),
    ("user_switches", [("agent_id", _A), ("user_id", _A)], "agent_user_unique", True),
    ("user_switches", [("user_id", _A)], "user", False),
)


# Unique indexes that hold only some documents: (collection, name) -> partialFilterExpression.
PARTIAL = {
    ("facts", "agent_scope_hash_unique"): {LIVE: True},
    # messages stored without a seq by the former three-step ingest stay out of the key
    ("messages", "session_seq"): {"seq": {"$exists": True}},
}


@translate_errors(unavailable)
class MongoStore(MongoMemoryMixin, MongoRunsMixin, MongoErasureMixin, MongoProvenanceMixin, MongoAccessMixin,
                 MongoStatsMixin, Store):
    """Every port method raises ``StoreUnavailable`` for a retryable driver error (a failover,
    a lost connection: ``_mongo_unavailable``), through the one decorator above."""

    def __init__(self, database, prefix: str = "memory2_", *, client=None) -> None:
        self.database = database
        self.prefix = prefix
        self._client = client

    @classmethod
    def from_url(cls, url: str, prefix: str = "memory2_") -> "MongoStore":
        """``mongodb://host/db`` or ``mongodb+srv://...``; the database name comes from the URL
        (``memory`` when it names none)."""
        from pymongo import MongoClient
        from pymongo.errors import ConfigurationError as MongoConfigurationError
        from pymongo.errors import InvalidURI

        try:
            client = MongoClient(url, tz_aware=True, **TIMEOUTS_MS)
        except (InvalidURI, MongoConfigurationError, ValueError) as exc:
            raise ConfigurationError(f"MEMORY_STORE_URL is not a usable MongoDB URL: {exc}") from exc
        return cls(client.get_default_database("memory"), prefix=prefix, client=client)

    def col(self, name: str):
        return self.database[f"{self.prefix}{name}"]

    def create_indexes(self) -> list[str]:
        self._mark_live_facts()
        names = []
        for collection, keys, name, unique in INDEXES:
            options: dict = {"name": name, "unique": unique}
            partial = PARTIAL.get((collection, name))
            if partial is not None:
                options["partialFilterExpression"] = partial
                existing = self.col(collection).index_information().get(name)
                if existing is not None and existing.get("partialFilterExpression") != partial:
                    # Made before the key became partial: same name, other options, so rebuild it.
                    self.col(collection).drop_index(name)
            names.append(f"{self.prefix}{collection}.{self.col(collection).create_index(keys, **options)}")
        return names

    def _mark_live_facts(self) -> None:
        """Facts stored before the ``live`` flag existed get it, so the partial key holds them;
        facts stored before ``updated_at`` was always set get their ``formed_at`` there, so
        that ``recent_facts`` (<Facts>) finds them; facts stored before ``search_text`` get
        their content there, which the text search index reads."""
        facts = self.col("facts")
        facts.update_many({LIVE: {"$exists": False}, "retired_at": None}, {"$set": {LIVE: True}})
        facts.update_many({LIVE: {"$exists": False}}, {"$set": {LIVE: False}})
        facts.update_many({"updated_at": None}, [{"$set": {"updated_at": "$formed_at"}}])
        facts.update_many({SEARCH_TEXT: {"$exists": False}}, [{"$set": {SEARCH_TEXT: "$content"}}])

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    # ------------------------------------------------------------------ agents -------------
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
                    self._count_uncounted(message.session_id)
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

    def _count_uncounted(self, session_id: str) -> bool:
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

    def record_usage(self, record: UsageRecord) -> None:
        # model names hold dots ("gpt-6.1-sol"): escaped like every free-form map
        doc = escape_keys(to_doc(record, record.usage_id))
        self.col(c.USAGE).replace_one({"_id": record.usage_id}, doc, upsert=True)

    def list_usage(self, agent_id: str, since: datetime | None = None) -> list[UsageRecord]:
        query: dict = {"agent_id": agent_id}
        if since is not None:
            query["at"] = {"$gte": c.utc(since)}
        return [from_doc(UsageRecord, unescape_keys(d)) for d in self.col(c.USAGE).find(query, sort=[("at", _A)])]

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

    # ------------------------------------------------------------------ claims --------------
    def claim_holder(self, session: SessionState) -> FormationRun | None:
        if session.active_run_id is None:
            return None
        holder = self.get_run(session.active_run_id)
        return holder if holder is not None and holder.status in c.ACTIVE_RUN_STATUSES else None

    def try_claim(
        self, session_id: str, rule: ClaimRule, run: FormationRun, now: datetime, lease_s: float
    ) -> FormationRun | None:
        sessions, runs = self.col("sessions"), self.col("runs")
        for _ in range(CAS_ATTEMPTS):
            session = self.get_session(session_id)
            if session is None or session.agent_id != run.agent_id:
                return None
            if session.active_run_id is not None and self.claim_holder(session) is None:
                # The holder finished or failed without releasing (a crash): free the claim.
                sessions.update_one({"_id": session_id, "active_run_id": session.active_run_id},
                                    {"$set": {"active_run_id": None, "lease_expires_at": None}})
                continue
            if session.active_run_id is not None:
                return None
            if self._count_uncounted(session_id):
                continue  # a message stored but not counted (its ingest died) joins the range
            if not c.rule_holds(session, rule):
                return None
            stored = c.claimed_run(session, run, now, lease_s)
            pending = escape_keys(to_doc(stored, stored.run_id))
            pending["_claim_pending"] = True
            try:
                runs.insert_one(pending)
            except DuplicateKeyError:
                return None  # a run id is used once
            won = sessions.find_one_and_update(
                {"_id": session_id, "last_seq": session.last_seq, "claimed_through": session.claimed_through,
                 "active_run_id": None},
                {"$set": {"claimed_through": session.last_seq, "messages_since": 0, "tokens_since": 0.0,
                          "active_run_id": stored.run_id, "lease_expires_at": stored.lease_expires_at}},
            )
            if won is None:
                runs.delete_one({"_id": stored.run_id, "_claim_pending": True})
                continue  # the session moved: re-read and re-check the rule
            runs.update_one({"_id": stored.run_id}, {"$unset": {"_claim_pending": ""}})
            return stored
        return None

    def _release(self, run: FormationRun, *, watermark: bool) -> None:
        sessions = self.col("sessions")
        if watermark:
            sessions.update_one({"_id": run.session_id}, {"$max": {"watermark": run.seq_to}})
        sessions.update_one({"_id": run.session_id, "active_run_id": run.run_id},
                            {"$set": {"active_run_id": None, "lease_expires_at": None}})

    def finish_run(self, run_id: str, now: datetime, totals: dict, changed_scope_keys: Sequence[str]) -> bool:
        run = self.require_run(run_id)
        if run.status == "done":
            self._release(run, watermark=True)  # completes a finish interrupted after its flip
            return False
        # Effects first, then the flip: a crash in between leaves a stale run whose rerun
        # repeats only idempotent steps (a second stamp bump merely invalidates caches).
        self._release(run, watermark=True)
        self.bump_scope_versions(run.agent_id, changed_scope_keys)
        flipped = self.col("runs").find_one_and_update(
            {"_id": run_id, "status": {"$ne": "done"}},
            {"$set": {"status": "done", "finished_at": c.utc(now), "totals": escape_keys(dict(totals)),
                      "lease_expires_at": None, "error": None}},
        )
        return flipped is not None

    def fail_run(self, run_id: str, error: str, now: datetime, *, dead: bool) -> None:
        run = self.require_run(run_id)
        if run.status == "done":
            return
        self._release(run, watermark=False)
        self.col("runs").update_one(
            {"_id": run_id, "status": {"$ne": "done"}},
            {"$set": {"status": "dead" if dead else "failed", "error": error, "lease_expires_at": None,
                      "finished_at": c.utc(now)}},
        )
