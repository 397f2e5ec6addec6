"""The SQLite side of the roll-up port (``ports.rollups``): one row per (agent, scope, scope id,
day, stage, model), added to by an upsert in the transaction that records the stage."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from pipeline.store.ports.rollups import (
    Increment, RollupStore, cost_row_of, day_of, fold, increments, selection,
)
from pipeline.store.ports.stats import CostRow
from pipeline.store.sqlite.db import Database
from pipeline.store.sqlite.parts import SQLiteRepository
from schemas.documents import UsageRecord

TABLE = "usage_rollups"
DDL = """
    agent_id TEXT NOT NULL, scope TEXT NOT NULL, scope_id TEXT NOT NULL, day TEXT NOT NULL,
    stage TEXT NOT NULL, model TEXT NOT NULL, kind TEXT, provider TEXT, price TEXT,
    calls INTEGER NOT NULL, input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
    usd REAL NOT NULL, unpriced INTEGER NOT NULL, snapshots TEXT NOT NULL,
    PRIMARY KEY (agent_id, scope, scope_id, day, stage, model)"""

_COLUMNS = ("agent_id, scope, scope_id, day, stage, model, kind, provider, price, calls, input_tokens, "
            "output_tokens, usd, unpriced, snapshots")
# the sums grow; a snapshot list becomes the union of both (``pipeline.cost.add_rows``' rule)
_UPSERT = (
    "INSERT INTO {t} (" + _COLUMNS + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (agent_id, scope, scope_id, day, stage, model) DO UPDATE SET "
    "calls = calls + excluded.calls, input_tokens = input_tokens + excluded.input_tokens, "
    "output_tokens = output_tokens + excluded.output_tokens, usd = usd + excluded.usd, "
    "unpriced = unpriced + excluded.unpriced, snapshots = CASE WHEN excluded.snapshots = '[]' THEN snapshots "
    "ELSE (SELECT json_group_array(value) FROM (SELECT value FROM json_each(snapshots) "
    "UNION SELECT value FROM json_each(excluded.snapshots))) END")


def add_rollups(db: Database, conn: sqlite3.Connection, found: Sequence[Increment]) -> None:
    """Add ``found`` to their rows, inside the caller's write transaction ``conn``."""
    conn.executemany(_UPSERT.format(t=db.t(TABLE)), [
        (*inc.key, inc.kind, inc.provider, inc.price, inc.calls, inc.input_tokens, inc.output_tokens, inc.usd,
         inc.unpriced, json.dumps(list(inc.snapshots))) for inc in found])


def run_owners(db: Database, conn: sqlite3.Connection, run_id: str | None) -> tuple[list[str], str | None]:
    """(users, session) of a stored run, ([], None) for none."""
    if not run_id:
        return [], None
    row = conn.execute(f"SELECT user_ids, session_id FROM {db.t('runs')} WHERE run_id = ?", (run_id,)).fetchone()
    return (json.loads(row[0] or "[]"), row[1]) if row else ([], None)


def record_increments(db: Database, conn: sqlite3.Connection, record: UsageRecord) -> list[Increment]:
    """What a usage record adds: under its run's users when its run is stored."""
    users, _ = run_owners(db, conn, record.run_id)
    return increments(record.agent_id, record.session_id, users, record.stage, day_of(record.at), record.by_model)


class SQLiteRollups(SQLiteRepository, RollupStore):
    """``rollup_rows`` and ``rebuild_rollups``: a repository of ``SQLiteStore`` on its ``Database``."""


    def rollup_rows(
        self, agent_id: str | None, *, user_id: str | None = None, session_id: str | None = None,
        since_day: str | None = None, until_day: str | None = None, all_time: bool = False,
    ) -> list[CostRow]:
        chosen = selection(agent_id, user_id, session_id, since_day, until_day, all_time)
        where, args = [f"{name} = ?" for name in chosen.equal], list(chosen.equal.values())
        if chosen.days is not None:  # served by the key (agent first) or by (scope, day) across agents
            where += ["day >= ?", "day < ?"]
            args += list(chosen.days)
        rows = self.db.conn().execute(
            "SELECT stage, day, model, MAX(kind), MAX(provider), MAX(price), SUM(calls), SUM(input_tokens), "
            "SUM(output_tokens), SUM(usd), SUM(unpriced), json_group_array(json(snapshots)) "
            f"FROM {self.db.t(TABLE)} WHERE {' AND '.join(where)} GROUP BY stage, day, model "
            "ORDER BY stage, day, model", args,
        ).fetchall()
        return [cost_row_of(*row[:11], [s for names in json.loads(row[11]) for s in names]) for row in rows]

    def rebuild_rollups(self) -> int:
        with self.db.write() as conn:
            found: list[Increment] = []
            for agent_id, session_id, users, usage in conn.execute(
                f"SELECT agent_id, session_id, user_ids, usage FROM {self.db.t('runs')} "
                "WHERE usage IS NOT NULL AND usage != '{}'"
            ):
                for stage, entry in json.loads(usage).items():
                    found += increments(agent_id, session_id, json.loads(users or "[]"), stage, entry["day"],
                                        entry["by_model"])
            for (doc,) in conn.execute(f"SELECT doc FROM {self.db.t('usage')}").fetchall():
                found += record_increments(self.db, conn, UsageRecord.model_validate_json(doc))
            conn.execute(f"DELETE FROM {self.db.t(TABLE)}")
            rows = fold(found)
            add_rollups(self.db, conn, rows)
            return len(rows)
