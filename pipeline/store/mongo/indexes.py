"""The Mongo store's indexes: every one the store's queries are served by, created by
``MongoStore.create_indexes``."""

from __future__ import annotations

from pymongo import ASCENDING, DESCENDING

from pipeline.store import _common as c
from pipeline.store.mongo.facts import LABELS, LIVE
from pipeline.store.mongo.provenance import IDS, UNPARSED
from pipeline.store.mongo.rollups import KEY as ROLLUP_KEY, ROLLUPS

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
    # a search's check that every live vector of the agent is of its model (``other_embedding_model``)
    ("facts", [("agent_id", _A), ("live", _A), ("embedding_model", _A)], "agent_live_model", False),
    # <Facts>: the latest changes of live facts (``recent_facts``)
    ("facts", [("agent_id", _A), ("scope_key", _A), ("retired_at", _A), ("updated_at", _D)],
     "agent_scope_live_updated", False),
    # dedup's recent facts (equality fields, then the range): ``recent_fact_ids``
    ("facts", [("agent_id", _A), ("scope_key", _A), ("embedding_model", _A), ("live", _A), ("formed_at", _D)],
     "agent_scope_model_live_formed", False),
    # beat's expiry task: live facts past their expiry (``expired_fact_ids``). A range on a
    # date brackets by type, so the facts with no expiry (null) are outside its bounds
    # (https://www.mongodb.com/docs/manual/reference/bson-type-comparison-order/)
    ("facts", [("live", _A), ("expires_at", _A)], "live_expires", False),
    # filters by category and metadata (``labelled_fact_ids``, a filtered ``recent_facts``):
    # multikey on the labels array, one seek per label
    ("facts", [("agent_id", _A), (LABELS, _A), ("scope_key", _A)], "agent_labels_scope", False),
    ("reflections", [("agent_id", _A), ("scope_key", _A), ("absorbed", _A), ("formed_at", _A)], "agent_scope_buffer", False),
    ("consolidated", [("agent_id", _A), ("scope_key", _A)], "agent_scope_unique", True),
    ("rejected", [("received_at", _D)], "received", False),
    (c.USAGE, [("agent_id", _A), ("at", _A)], "agent_at", False),
    # statistics (``ports.stats``): a session's usage records, and those of a user's runs
    (c.USAGE, [("agent_id", _A), ("session_id", _A), ("at", _A)], "agent_session_at", False),
    (c.USAGE, [("run_id", _A)], "run", False),
    # usage roll-ups (``rollups``): one row per key, and every agent's spend of some days
    (ROLLUPS, [(k, _A) for k in ROLLUP_KEY], "key_unique", True),
    (ROLLUPS, [("scope", _A), ("day", _A)], "scope_day", False),
    ("scope_versions", [("agent_id", _A), ("scope_key", _A)], "agent_scope_unique", True),
    ("contexts", [("session_id", _A), ("user_id", _A)], "session_user_unique", True),
    ("contexts", [("user_id", _A)], "user", False),
    # an erasure drops every cached context of an agent it changed (``erase_memory``)
    ("contexts", [("agent_id", _A)], "agent", False),
    # provenance queries (``provenance``): what rests on one user, in any agent
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
    # webhooks (``webhooks``): an agent's subscriptions, due deliveries, a subscription's and
    # an agent's log, and the deliveries about one person (an erasure withdraws them)
    ("webhook_subscriptions", [("agent_id", _A), ("created_at", _A)], "agent_created", False),
    ("webhook_deliveries", [("status", _A), ("next_attempt_at", _A)], "due", False),
    ("webhook_deliveries", [("subscription_id", _A), ("created_at", _D)], "subscription_created", False),
    ("webhook_deliveries", [("agent_id", _A), ("created_at", _D)], "agent_created", False),
    ("webhook_deliveries", [("event.subjects", _A), ("agent_id", _A)], "subjects", False),
    ("rejected", [(UNPARSED, _A)], "unparsed", False),
    # access control (``access``)
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
