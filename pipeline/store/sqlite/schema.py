"""The SQLite store's schema: its tables, indexes and the columns added since a table first
shipped, created (and upgraded) idempotently when a store is opened."""

from __future__ import annotations

import sqlite3
from datetime import datetime

from pipeline.store._common import ts
from pipeline.store.sqlite.db import Database
from pipeline.store.sqlite.provenance import create_provenance_schema
from pipeline.store.sqlite.caps import DDL as CAPS_DDL, TABLE as CAPS
from pipeline.store.sqlite.labels import DDL as LABELS_DDL, TABLE as LABELS, create_label_triggers
from pipeline.store.sqlite.rollups import DDL as ROLLUPS_DDL, TABLE as ROLLUPS
from pipeline.store.sqlite.stats import BACKFILL

# (table, DDL body). Every table keeps the whole document as JSON in ``doc`` plus the columns
# that are queried or unique. Unique keys never hold NULL: scope keys are computed strings.
_TABLES: tuple[tuple[str, str], ...] = (
    ("agents", "agent_id TEXT PRIMARY KEY, doc TEXT NOT NULL"),
    ("messages", """
        event_id TEXT NOT NULL, session_id TEXT NOT NULL, message_id TEXT NOT NULL,
        agent_id TEXT NOT NULL, seq INTEGER NOT NULL, sender_id TEXT, created_at TEXT NOT NULL,
        doc TEXT NOT NULL"""),
    ("sessions", """
        session_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, last_activity_at TEXT,
        unclaimed INTEGER NOT NULL DEFAULT 0, active_run_id TEXT, doc TEXT NOT NULL"""),
    ("runs", """
        run_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, session_id TEXT NOT NULL,
        status TEXT NOT NULL, lease_expires_at TEXT, created_at TEXT NOT NULL,
        doc TEXT NOT NULL"""),
    ("facts", """
        fact_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, scope_key TEXT NOT NULL,
        hash TEXT NOT NULL, scope TEXT NOT NULL, user_id TEXT, content TEXT NOT NULL,
        embedding BLOB, embedding_model TEXT, formed_at TEXT NOT NULL, retired_at TEXT,
        doc TEXT NOT NULL, updated_at TEXT, search_text TEXT"""),
    ("reflections", """
        reflection_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, scope_key TEXT NOT NULL,
        absorbed INTEGER NOT NULL DEFAULT 0, formed_at TEXT NOT NULL, doc TEXT NOT NULL"""),
    ("consolidated", """
        agent_id TEXT NOT NULL, scope_key TEXT NOT NULL, version INTEGER NOT NULL,
        doc TEXT NOT NULL, PRIMARY KEY (agent_id, scope_key)"""),
    ("rejected", "rejection_id TEXT PRIMARY KEY, received_at TEXT NOT NULL, doc TEXT NOT NULL"),
    ("scope_versions", """
        agent_id TEXT NOT NULL, scope_key TEXT NOT NULL, version INTEGER NOT NULL,
        PRIMARY KEY (agent_id, scope_key)"""),
    ("contexts", """
        session_id TEXT NOT NULL, user_id TEXT NOT NULL, doc TEXT NOT NULL,
        PRIMARY KEY (session_id, user_id)"""),
    ("leases", "name TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_at TEXT NOT NULL"),
    ("usage", "usage_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, at TEXT NOT NULL, doc TEXT NOT NULL"),
    # usage summed per agent, user, session and day (``rollups``)
    (ROLLUPS, ROLLUPS_DDL),
    # access control (``access``): keys by the digest of their secret, the audit log,
    # queued jobs, and each user's own memory switch per agent
    ("api_keys", "key_id TEXT PRIMARY KEY, digest TEXT NOT NULL UNIQUE, doc TEXT NOT NULL"),
    ("audit", "audit_id TEXT PRIMARY KEY, at TEXT NOT NULL, action TEXT NOT NULL, doc TEXT NOT NULL"),
    ("jobs", "job_id TEXT PRIMARY KEY, doc TEXT NOT NULL"),
    ("user_switches", """
        agent_id TEXT NOT NULL, user_id TEXT NOT NULL, enabled INTEGER NOT NULL, updated_at TEXT NOT NULL,
        PRIMARY KEY (agent_id, user_id)"""),
    # webhooks (``webhooks``): subscriptions, deliveries, and the people each delivery is about
    ("webhook_subscriptions", """
        subscription_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, created_at TEXT NOT NULL, doc TEXT NOT NULL"""),
    ("webhook_deliveries", """
        delivery_id TEXT PRIMARY KEY, subscription_id TEXT NOT NULL, agent_id TEXT NOT NULL, status TEXT NOT NULL,
        next_at TEXT NOT NULL, created_at TEXT NOT NULL, doc TEXT NOT NULL"""),
    ("webhook_subjects", "user_id TEXT NOT NULL, delivery_id TEXT NOT NULL, PRIMARY KEY (user_id, delivery_id)"),
    # spend caps set at run time (``caps``), one row per agent and one global
    (CAPS, CAPS_DDL),
    # each live fact's labels, for filters by category and metadata (``labels``)
    (LABELS, LABELS_DDL),
)

# (index name suffix, table, columns, unique). A unique key that holds only some rows says so
# in _PARTIAL.
_INDEXES: tuple[tuple[str, str, str, bool], ...] = (
    ("messages_event_id", "messages", "event_id", True),
    ("messages_session_message", "messages", "session_id, message_id", True),
    ("messages_session_seq", "messages", "session_id, seq", True),
    ("messages_sender", "messages", "sender_id", False),
    ("sessions_cold", "sessions", "active_run_id, last_activity_at", False),
    ("sessions_agent", "sessions", "agent_id", False),
    ("runs_status_lease", "runs", "status, lease_expires_at", False),
    ("runs_session", "runs", "session_id, created_at", False),
    ("runs_created", "runs", "created_at", False),
    # an agent's runs, newest first (``list_runs(agent_id=...)``: runs, cost)
    ("runs_agent_created", "runs", "agent_id, created_at", False),
    ("facts_scope_hash", "facts", "agent_id, scope_key, hash", True),
    ("facts_scope_formed", "facts", "agent_id, scope_key, formed_at", False),
    ("facts_model", "facts", "embedding_model", False),
    ("facts_scope_updated", "facts", "agent_id, scope_key, updated_at", False),
    ("facts_unchanged", "facts", "fact_id", False),
    ("facts_scope_model_formed", "facts", "agent_id, scope_key, embedding_model, formed_at", False),
    # a search's check that every live vector of the agent is of its model (``other_embedding_model``)
    ("facts_agent_model_live", "facts", "agent_id, embedding_model", False),
    ("reflections_scope", "reflections", "agent_id, scope_key, absorbed, formed_at", False),
    ("rejected_received", "rejected", "received_at", False),
    ("usage_agent_at", "usage", "agent_id, at", False),
    # an erasure drops every cached context of an agent it changed (``erase_memory``)
    ("contexts_agent", "contexts", "json_extract(doc, '$.agent_id')", False),
    # provenance queries under every agent (``provenance``): a user's own scope key,
    # their cached contexts, and blob text no merge made
    ("facts_scope_key", "facts", "scope_key", False),
    ("reflections_scope_key", "reflections", "scope_key", False),
    ("consolidated_scope_key", "consolidated", "scope_key", False),
    ("scope_versions_scope_key", "scope_versions", "scope_key", False),
    ("contexts_user", "contexts", "user_id", False),
    ("consolidated_last_run", "consolidated", "json_extract(doc, '$.last_run_id')", False),
    ("audit_at", "audit", "at", False),
    ("user_switches_user", "user_switches", "user_id", False),
    # statistics (``ports.stats``): an agent's runs by time (runs_agent_created above), usage
    # records by session and by run
    ("usage_session", "usage", "json_extract(doc, '$.session_id')", False),
    ("usage_run", "usage", "json_extract(doc, '$.run_id')", False),
    ("runs_unsummed", "runs", "run_id", False),
    ("webhook_subscriptions_agent", "webhook_subscriptions", "agent_id, created_at", False),
    ("webhook_deliveries_due", "webhook_deliveries", "status, next_at", False),
    ("webhook_deliveries_subscription", "webhook_deliveries", "subscription_id, created_at", False),
    ("webhook_deliveries_agent", "webhook_deliveries", "agent_id, created_at", False),
    ("webhook_subjects_delivery", "webhook_subjects", "delivery_id", False),
    # every agent's spend of some days (``rollups``: the global spend cap)
    ("usage_rollups_day", ROLLUPS, "scope, day", False),
    # live facts that expire, soonest first (``expired_fact_ids``: beat's expiry task)
    ("facts_expiring", "facts", "expires_at", False),
    # a fact's label rows, dropped when it is rewritten (``labels``' triggers)
    ("fact_labels_fact", LABELS, "fact_id", False),
)

# Only live facts hold their text exclusively: a retired fact must not block the same text
# from being formed again later (it is a new fact then, and the retired one stays as it was).
_PARTIAL = {"facts_scope_hash": "retired_at IS NULL",
            # rows still to backfill (none once upgraded): opening a big file stays cheap
            "facts_unchanged": "updated_at IS NULL",
            "runs_unsummed": "usage IS NULL",
            "facts_expiring": "retired_at IS NULL AND expires_at IS NOT NULL",
            "facts_agent_model_live": "retired_at IS NULL"}

TABLES = tuple(name for name, _ in _TABLES)

# Columns added after a table was first shipped: (table, column, type). A file made before
# gets them with ALTER TABLE when opened, then ``_backfill`` fills them from the documents.
_ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("facts", "updated_at", "TEXT"),
    # Fact.search_text; NULL on a fact written before: search reads its content then
    ("facts", "search_text", "TEXT"),
    # what the statistics sum, beside the document (``stats``): NULL until backfilled
    ("runs", "usage", "TEXT"),
    ("runs", "user_ids", "TEXT"),
    # Fact.expires_at; NULL on a fact written before, which had none
    ("facts", "expires_at", "TEXT"),
    # Fact.labels as a JSON array (``labels``); filled from the categories when added
    ("facts", "labels", "TEXT"),
)


def create_schema(db: Database) -> list[str]:
    """Create every table and index (and the provenance triggers), idempotently; a file made
    by an older version gets the columns added since, filled from its documents."""
    names, added = [], set()
    with db.write() as conn:
        for table, body in _TABLES:
            conn.execute(f"CREATE TABLE IF NOT EXISTS {db.t(table)} ({body})")
        for table, column, kind in _ADDED_COLUMNS:
            present = {row[1] for row in conn.execute(f"PRAGMA table_info({db.t(table)})").fetchall()}
            if column not in present:
                conn.execute(f"ALTER TABLE {db.t(table)} ADD COLUMN {column} {kind}")
                added.add((table, column))
        for suffix, table, columns, unique in _INDEXES:
            name = f"{db.prefix}{suffix}"
            kind = "UNIQUE INDEX" if unique else "INDEX"
            where = f" WHERE {_PARTIAL[suffix]}" if suffix in _PARTIAL else ""
            existing = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?",
                                    (name,)).fetchone()
            if existing and where and not existing[0].endswith(where):
                conn.execute(f'DROP INDEX "{name}"')  # a file made before the key became partial
            conn.execute(f'CREATE {kind} IF NOT EXISTS "{name}" ON {db.t(table)} ({columns}){where}')
            names.append(name)
        _backfill(db, conn)
        create_label_triggers(conn, db.t, db.prefix, backfill=("facts", "labels") in added)
        names += create_provenance_schema(conn, db.t, db.prefix)
    return names


def _backfill(db: Database, conn: sqlite3.Connection) -> None:
    """Facts written before ``updated_at`` was a column: their latest change is the
    document's ``updated_at`` (an UPDATE set it) or else ``formed_at``. Runs written before
    ``usage`` and ``user_ids`` were columns: from their documents."""
    conn.execute(BACKFILL.format(runs=db.t("runs")))
    facts = db.t("facts")
    conn.execute(f"UPDATE {facts} SET updated_at = formed_at WHERE updated_at IS NULL "
                 "AND json_extract(doc, '$.updated_at') IS NULL")
    for fact_id, changed in conn.execute(
        f"SELECT fact_id, json_extract(doc, '$.updated_at') FROM {facts} WHERE updated_at IS NULL"
    ).fetchall():
        conn.execute(f"UPDATE {facts} SET updated_at = ? WHERE fact_id = ?",
                     (ts(datetime.fromisoformat(changed)), fact_id))
