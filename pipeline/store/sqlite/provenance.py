"""SQLite store, provenance queries (design §11 "Provenance and erasure"): what rests on one user,
read through an index instead of a scan of every table.

The user ids of a document sit in JSON arrays inside ``doc`` (a fact's ``source_user_ids``, a
message's ``session_users``, a session's ``users``, a run's ``user_ids``), which SQLite cannot
index. ``user_refs`` holds one row per (document, user id) of those arrays, kept by triggers on
every insert, update and delete of the document, in the same transaction: no write path of the
store has to remember it, and it cannot drift. A fact or reflection outside a user's scope with
no source user (stored before provenance, or v1 text) gets a row with user id ``''``: the
unattributed items are one index lookup too. A file made before the table gets it, filled from
the documents, the first time a new version opens it (``create_schema``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator

from pipeline import withdrawal as w
from pipeline.footprint import Footprint, Resting
from pipeline.store.ports.provenance import ProvenanceStore
from pipeline.store.sqlite.db import Database
from pipeline.store.sqlite.facts import fact_from_row
from pipeline.store.sqlite.parts import SQLiteRepository
from pipeline.user_ids import raw_names_user
from schemas.documents import ConsolidatedBlob, Fact, FormationRun, Reflection, StoredMessage, scope_key

REFS = "user_refs"
UNATTRIBUTED = ""

# (kind, table, id expression over a row alias, JSON path of the user ids, whether an empty
# array makes an unattributed row)
_SOURCES: tuple[tuple[str, str, str, str, bool], ...] = (
    ("facts", "facts", "{row}.fact_id", "$.source_user_ids", True),
    ("reflections", "reflections", "{row}.reflection_id", "$.source_user_ids", True),
    ("messages", "messages", "CAST({row}.rowid AS TEXT)", "$.session_users", False),
    ("sessions", "sessions", "{row}.session_id", "$.users", False),
    ("runs", "runs", "{row}.run_id", "$.user_ids", False),
)
#: a rejected event's raw payload: every JSON string of id length (design §3: ids are at most
#: 128 characters) is a ref; a payload that is not JSON gets one ``UNPARSED`` row, and only
#: those are read whole (``pipeline.user_ids.raw_paths``)
MAX_ID_CHARS = 128
UNPARSED = "<raw payload is not JSON>"  # never an id: only marks the payloads read whole


def _statements(t, kind: str, ident: str, path: str, unattributed: bool, row: str, table: str | None) -> list[str]:
    """INSERTs of the refs of ``row`` (``NEW`` in a trigger; every row of ``table`` to fill)."""
    key, into = ident.format(row=row), f"INSERT OR IGNORE INTO {t(REFS)} (kind, item_id, agent_id, user_id)"
    source = f"{t(table)} AS {row}, " if table else ""
    out = [f"{into} SELECT '{kind}', {key}, {row}.agent_id, value FROM {source}json_each({row}.doc, '{path}') "
           "WHERE value IS NOT NULL AND value != ''"]
    if unattributed:
        source = f" FROM {t(table)} AS {row}" if table else ""
        out.append(f"{into} SELECT '{kind}', {key}, {row}.agent_id, ''{source} "
                   f"WHERE COALESCE(json_array_length({row}.doc, '{path}'), 0) = 0 AND {row}.scope_key NOT LIKE 'user:%'")
    return out


def _stale(t, kind: str, ident: str, path: str, unattributed: bool) -> str:
    """DELETE of the refs of ``NEW``'s id that its document no longer holds: a rewrite that
    keeps the same users (every message rewrites its session) writes no ref at all."""
    held = (f"SELECT value FROM json_each(NEW.doc, '{path}') WHERE value IS NOT NULL AND value != ''")
    if unattributed:
        held += (f" UNION ALL SELECT '' WHERE COALESCE(json_array_length(NEW.doc, '{path}'), 0) = 0 "
                 "AND NEW.scope_key NOT LIKE 'user:%'")
    return (f"DELETE FROM {t(REFS)} WHERE kind = '{kind}' AND item_id = {ident.format(row='NEW')} "
            f"AND user_id NOT IN ({held})")


def _rejected_statements(t, row: str, table: str | None) -> list[str]:
    into = f"INSERT OR IGNORE INTO {t(REFS)} (kind, item_id, agent_id, user_id)"
    raw, owner = f"json_extract({row}.doc, '$.raw')", f"COALESCE(json_extract({row}.doc, '$.agent_id'), '')"
    source = f"{t(table)} AS {row}, " if table else ""
    only = f" FROM {t(table)} AS {row}" if table else ""
    return [
        f"{into} SELECT 'rejected', {row}.rejection_id, {owner}, value FROM {source}json_tree({raw}) "
        f"WHERE json_valid({raw}) AND type = 'text' AND length(value) BETWEEN 1 AND {MAX_ID_CHARS}",
        f"{into} SELECT 'rejected', {row}.rejection_id, {owner}, '{UNPARSED}'{only} WHERE NOT json_valid({raw})",
    ]


def create_provenance_schema(conn: sqlite3.Connection, t, prefix: str) -> list[str]:
    """The ``user_refs`` table, its index and triggers; filled from the documents when new."""
    new = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                       (f"{prefix}{REFS}",)).fetchone() is None
    conn.execute(f"CREATE TABLE IF NOT EXISTS {t(REFS)} (kind TEXT NOT NULL, item_id TEXT NOT NULL, "
                 "agent_id TEXT NOT NULL, user_id TEXT NOT NULL, PRIMARY KEY (kind, item_id, user_id))")
    # covering (item_id last): without it SQLite's planner prefers the primary key's covering
    # ``kind`` prefix, which reads every row of that kind
    index = f"{prefix}user_refs_user_item"
    conn.execute(f'CREATE INDEX IF NOT EXISTS "{index}" ON {t(REFS)} (user_id, kind, agent_id, item_id)')
    sources = [(kind, table, ident, path,
                lambda row, tb, k=kind, i=ident, p=path, u=unattributed: _statements(t, k, i, p, u, row, tb),
                _stale(t, kind, ident, path, unattributed))
               for kind, table, ident, path, unattributed in _SOURCES]
    sources.append(("rejected", "rejected", "{row}.rejection_id", "$.raw",
                    lambda row, tb: _rejected_statements(t, row, tb),
                    f"DELETE FROM {t(REFS)} WHERE kind = 'rejected' AND item_id = NEW.rejection_id"))
    for kind, table, ident, path, statements, fresh in sources:
        delete = f"DELETE FROM {t(REFS)} WHERE kind = '{kind}' AND item_id = {ident.format(row='OLD')}"
        insert = "; ".join(statements("NEW", None))
        # An INSERT OR REPLACE removes the old row without firing DELETE triggers (SQLite's
        # recursive_triggers is off): the INSERT trigger clears the refs the id no longer has
        # (``fresh``), then adds the missing ones (INSERT OR IGNORE).
        # An UPDATE refreshes the refs only when the ids changed: a session's document is
        # rewritten by every message it receives, a fact's by every search that returns it.
        changed = f"WHEN json_extract(OLD.doc, '{path}') IS NOT json_extract(NEW.doc, '{path}')"
        for suffix, event, body in (("insert", "INSERT", f"{fresh}; {insert}"),
                                    ("changed", f"UPDATE OF doc ON {t(table)} {changed}", f"{fresh}; {insert}"),
                                    ("delete", "DELETE", delete)):
            on = "" if suffix == "changed" else f" ON {t(table)}"
            conn.execute(f'CREATE TRIGGER IF NOT EXISTS "{prefix}{table}_refs_{suffix}" AFTER {event}{on} '
                         f"BEGIN {body}; END")
        if new:
            for statement in statements("src", table):
                conn.execute(statement)
    return [index]


def _in(values: list) -> str:
    return ", ".join("?" for _ in values) or "NULL"


class SQLiteProvenance(SQLiteRepository, ProvenanceStore):
    """The provenance port of ``SQLiteStore``: a repository on its ``Database``."""


    def _ref_ids(self, conn, kind: str, user_id: str, agent_id: str | None) -> list[str]:
        agent_clause, args = ("AND agent_id = ?", [agent_id]) if agent_id else ("", [])
        return [i for (i,) in conn.execute(
            f"SELECT item_id FROM {self.db.t(REFS)} WHERE user_id = ? AND kind = ? {agent_clause}",
            (user_id, kind, *args)).fetchall()]

    def _items(self, conn, fact_ids: list[str], reflection_ids: list[str]) -> Resting:
        t = self.db.t
        facts = [fact_from_row(doc, emb) for doc, emb in conn.execute(
            f"SELECT doc, embedding FROM {t('facts')} WHERE fact_id IN ({_in(fact_ids)})", fact_ids)]
        reflections = [Reflection.model_validate_json(doc) for (doc,) in conn.execute(
            f"SELECT doc FROM {t('reflections')} WHERE reflection_id IN ({_in(reflection_ids)})", reflection_ids)]
        return Resting(facts=facts, reflections=reflections)

    def resting_on(self, user_id: str, agent_id: str | None = None) -> Resting:
        conn, t = self.db.conn(), self.db.t
        key = scope_key("user", user_id=user_id)
        agent_clause, args = ("AND agent_id = ?", [agent_id]) if agent_id else ("", [])
        fact_ids = self._ref_ids(conn, "facts", user_id, agent_id) + [i for (i,) in conn.execute(
            f"SELECT fact_id FROM {t('facts')} WHERE scope_key = ? {agent_clause}", (key, *args))]
        reflection_ids = self._ref_ids(conn, "reflections", user_id, agent_id) + [i for (i,) in conn.execute(
            f"SELECT reflection_id FROM {t('reflections')} WHERE scope_key = ? {agent_clause}", (key, *args))]
        return self._items(conn, list(dict.fromkeys(fact_ids)), list(dict.fromkeys(reflection_ids)))

    def reflection_ids(self, agent_id: str, scope_key: str, *, absorbed_only: bool = False) -> list[str]:
        absorbed = " AND absorbed = 1" if absorbed_only else ""
        return [i for (i,) in self.db.conn().execute(
            f"SELECT reflection_id FROM {self.db.t('reflections')} WHERE agent_id = ? AND scope_key = ?{absorbed} "
            "ORDER BY formed_at, rowid", (agent_id, scope_key))]

    def absorbed_from_others(self, agent_id: str, scope_key: str, user_id: str) -> bool:
        # the scope's absorbed reflections by (agent_id, scope_key, absorbed), each one's users
        # by the refs' primary key (kind, item_id, user_id): no document is read
        t = self.db.t
        return self.db.conn().execute(
            f"SELECT EXISTS (SELECT 1 FROM {t('reflections')} r JOIN {t(REFS)} u "
            "ON u.kind = 'reflections' AND u.item_id = r.reflection_id "
            "WHERE r.agent_id = ? AND r.scope_key = ? AND r.absorbed = 1 AND u.user_id NOT IN (?, ?))",
            (agent_id, scope_key, user_id, UNATTRIBUTED)).fetchone()[0] == 1

    def unattributed(self, agent_id: str | None = None) -> Resting:
        conn = self.db.conn()
        return self._items(conn, self._ref_ids(conn, "facts", UNATTRIBUTED, agent_id),
                           self._ref_ids(conn, "reflections", UNATTRIBUTED, agent_id))

    def unexplained_blobs(self, agent_id: str | None = None) -> list[ConsolidatedBlob]:
        agent_clause, args = ("AND agent_id = ?", [agent_id]) if agent_id else ("", [])
        rows = self.db.conn().execute(
            f"SELECT doc FROM {self.db.t('consolidated')} WHERE json_extract(doc, '$.last_run_id') IS NULL "
            f"AND scope_key NOT LIKE 'user:%' {agent_clause}", args).fetchall()
        blobs = [ConsolidatedBlob.model_validate_json(doc) for (doc,) in rows]
        return [b for b in blobs if b.consolidated_content.strip() and not b.absorbing_ids]

    def own_blobs(self, user_id: str, agent_id: str | None = None) -> list[ConsolidatedBlob]:
        agent_clause, args = ("AND agent_id = ?", [agent_id]) if agent_id else ("", [])
        rows = self.db.conn().execute(  # consolidated_scope_key
            f"SELECT doc FROM {self.db.t('consolidated')} WHERE scope_key = ? {agent_clause} ORDER BY agent_id",
            [scope_key("user", user_id=user_id), *args]).fetchall()
        return [ConsolidatedBlob.model_validate_json(doc) for (doc,) in rows]

    def footprint(self, user_id: str, agent_id: str | None = None) -> Footprint:
        conn, t = self.db.conn(), self.db.t
        key = scope_key("user", user_id=user_id)
        agent_clause, args = ("AND agent_id = ?", [agent_id]) if agent_id else ("", [])

        def count(sql: str, *params) -> int:
            return conn.execute(sql, params).fetchone()[0]

        found = {
            "messages.sender_id": count(f"SELECT COUNT(*) FROM {t('messages')} WHERE sender_id = ? {agent_clause}",
                                        user_id, *args),
            "messages.session_users": len(self._ref_ids(conn, "messages", user_id, agent_id)),
            "sessions.users": len(self._ref_ids(conn, "sessions", user_id, agent_id)),
            "runs.user_ids": len(self._ref_ids(conn, "runs", user_id, agent_id)),
            "facts.source_user_ids": len(self._ref_ids(conn, "facts", user_id, agent_id)),
            "reflections.source_user_ids": len(self._ref_ids(conn, "reflections", user_id, agent_id)),
            "contexts.user_id": count(f"SELECT COUNT(*) FROM {t('contexts')} WHERE user_id = ?"
                                      + (" AND json_extract(doc, '$.agent_id') = ?" if agent_id else ""),
                                      user_id, *args),
        }
        for table in ("facts", "reflections", "consolidated", "scope_versions"):
            found[f"{table}.scope_key"] = count(
                f"SELECT COUNT(*) FROM {t(table)} WHERE scope_key = ? {agent_clause}", key, *args)
        found["rejected.raw"] = len(self.rejected_naming(user_id, agent_id))
        # leases are held only while a merge runs: a handful, whatever the store's size
        leases = [name for (name,) in conn.execute(f"SELECT name FROM {t('leases')}")]
        return Footprint.of(found, leases, user_id, agent_id)

    def rejected_naming(self, user_id: str, agent_id: str | None = None) -> list[str]:
        conn, t = self.db.conn(), self.db.t
        owners = (agent_id, "") if agent_id else None
        owner_clause = "AND agent_id IN (?, ?)" if owners else ""
        found = [i for (i,) in conn.execute(
            f"SELECT item_id FROM {t(REFS)} WHERE user_id IN (?, ?) AND kind = 'rejected' {owner_clause}",
            (user_id, scope_key("user", user_id=user_id), *(owners or ())))]
        unparsed = [i for (i,) in conn.execute(
            f"SELECT item_id FROM {t(REFS)} WHERE user_id = ? AND kind = 'rejected' {owner_clause}",
            (UNPARSED, *(owners or ())))]
        for rejection_id, doc in conn.execute(
                f"SELECT rejection_id, json_extract(doc, '$.raw') FROM {t('rejected')} "
                f"WHERE rejection_id IN ({_in(unparsed)})", unparsed):
            if raw_names_user(doc or "", user_id):
                found.append(rejection_id)
        return list(dict.fromkeys(found))

    def user_messages(self, user_id: str, agent_id: str | None = None) -> Iterator[StoredMessage]:
        agent_clause, args = ("AND agent_id = ?", [agent_id]) if agent_id else ("", [])
        cursor = self.db.conn().execute(
            f"SELECT doc FROM {self.db.t('messages')} WHERE sender_id = ? {agent_clause} ORDER BY rowid",
            (user_id, *args))
        for (doc,) in cursor:
            yield StoredMessage.model_validate_json(doc)

    def user_runs(self, user_id: str, agent_id: str | None = None) -> list[FormationRun]:
        conn = self.db.conn()
        ids = self._ref_ids(conn, "runs", user_id, agent_id)
        return [FormationRun.model_validate_json(doc) for (doc,) in conn.execute(
            f"SELECT doc FROM {self.db.t('runs')} WHERE run_id IN ({_in(ids)}) ORDER BY created_at", ids)]

    def set_item_sources(self, kind: str, item_id: str, user_ids: list[str], message_ids: list[str]) -> bool:
        if kind not in ("facts", "reflections"):
            raise ValueError(f"kind must be facts or reflections, got {kind!r}")
        column = "fact_id" if kind == "facts" else "reflection_id"
        with self.db.write() as conn:
            return conn.execute(
                f"UPDATE {self.db.t(kind)} SET doc = json_set(doc, '$.source_user_ids', json(?), '$.source_message_ids', "
                "CASE WHEN COALESCE(json_array_length(doc, '$.source_message_ids'), 0) = 0 THEN json(?) "
                "ELSE json(json_extract(doc, '$.source_message_ids')) END) "
                f"WHERE {column} = ? AND COALESCE(json_array_length(doc, '$.source_user_ids'), 0) = 0",
                (json.dumps(user_ids), json.dumps(message_ids), item_id)).rowcount > 0

    def withdraw_user(self, withdrawal: w.Withdrawal) -> Fact | Reflection | None:
        t, facts = self.db.t, withdrawal.kind == "facts"
        with self.db.write() as conn:  # read and write in one transaction: nothing comes between
            if facts:
                row = conn.execute(f"SELECT doc, embedding FROM {t('facts')} WHERE fact_id = ?",
                                   (withdrawal.item_id,)).fetchone()
                item = fact_from_row(*row) if row else None
            else:
                row = conn.execute(f"SELECT doc FROM {t('reflections')} WHERE reflection_id = ?",
                                   (withdrawal.item_id,)).fetchone()
                item = Reflection.model_validate_json(row[0]) if row else None
            if item is None or not w.applies(item, withdrawal):
                return None
            updated = w.withdrawn(item, withdrawal)
            if isinstance(updated, Fact):  # the search text holds the history and the source text
                conn.execute(f"UPDATE {t('facts')} SET doc = ?, search_text = ?, labels = ? WHERE fact_id = ?",
                             (updated.model_dump_json(exclude={"embedding"}), updated.search_text,
                              json.dumps(updated.labels), updated.fact_id))
            else:
                conn.execute(f"UPDATE {t('reflections')} SET doc = ? WHERE reflection_id = ?",
                             (updated.model_dump_json(), updated.reflection_id))
            return updated
