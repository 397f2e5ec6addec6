"""SQLite store, fact labels (design §13 "Categories and metadata"): the index a filter by
category or metadata reads.

A fact's labels (``Fact.labels``: ``category:travel``, ``meta:project="apollo"``) are kept as a
JSON array in the facts table's ``labels`` column, and one row per live fact and label in
``fact_labels``, keyed (agent, label, scope key, fact): a filter finds its facts by an index
seek per label, never by reading every fact of the agent. Triggers keep the table in step with
the facts (inserted, rewritten, retired, deleted by an erasure), whatever module writes them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

from pipeline.store.sqlite.db import qmarks

TABLE = "fact_labels"
DDL = ("agent_id TEXT NOT NULL, label TEXT NOT NULL, scope_key TEXT NOT NULL, fact_id TEXT NOT NULL, "
       "PRIMARY KEY (agent_id, label, scope_key, fact_id)")


def create_label_triggers(conn: sqlite3.Connection, t: Callable[[str], str], prefix: str, *, backfill: bool) -> None:
    """The triggers that keep ``fact_labels`` in step with the facts; with ``backfill`` (the
    ``labels`` column was just added) every fact's labels are first written from its
    categories, the only labels a fact stored before them could have."""
    facts, labels = t("facts"), t(TABLE)
    rows = (f"INSERT OR IGNORE INTO {labels} (agent_id, label, scope_key, fact_id) "
            "SELECT NEW.agent_id, value, NEW.scope_key, NEW.fact_id FROM json_each(NEW.labels) "
            "WHERE NEW.retired_at IS NULL")
    gone = f"DELETE FROM {labels} WHERE fact_id = OLD.fact_id"
    for suffix, event, body in (
        ("insert", f"INSERT ON {facts}", rows),
        # ``_put_fact`` sets every column: a rewrite, a retirement or a re-embedding all pass here
        ("update", f"UPDATE OF labels, retired_at, scope_key, agent_id ON {facts}", f"{gone}; {rows}"),
        ("delete", f"DELETE ON {facts}", gone),
    ):
        conn.execute(f'CREATE TRIGGER IF NOT EXISTS "{prefix}facts_labels_{suffix}" AFTER {event} BEGIN {body}; END')
    if backfill:
        conn.execute(f"UPDATE {facts} SET labels = (SELECT json_group_array('category:' || value) "
                     "FROM json_each(doc, '$.categories')) WHERE labels IS NULL")


def labelled_query(t: Callable[[str], str], agent_id: str, scope_keys: Sequence[str],
                   groups: Sequence[Sequence[str]]) -> tuple[str, list[str]]:
    """``SELECT fact_id`` of the live facts of ``agent_id`` in ``scope_keys`` holding a label of
    every group, and its arguments: one index seek per label, the groups intersected."""
    parts, args = [], []
    for group in groups:
        parts.append(f"SELECT fact_id FROM {t(TABLE)} WHERE agent_id = ? AND label IN ({qmarks(group)}) "
                     f"AND scope_key IN ({qmarks(scope_keys)})")
        args += [agent_id, *group, *scope_keys]
    return " INTERSECT ".join(parts), args
