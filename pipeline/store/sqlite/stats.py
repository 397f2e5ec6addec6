"""The SQLite side of the statistics port (``ports.stats``): usage records, and sums and
counts in SQL.

A run's document holds every stage's output (vectors included: 14 kB on average in the soak),
so summing its calls through the document would parse all of it. Two columns beside it keep
what the sums read: ``usage`` (per stage with calls: the day and the per-model rows) and
``user_ids``, written with the document (``run_columns``, ``stage_usage``), filled from the
documents of a file made before them (``BACKFILL``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pipeline.store import _common as c
from pipeline.store.ports.stats import CostRow, ReflectionCounts, StatsStore, snapshots_of
from pipeline.store.sqlite.db import Database
from pipeline.store.sqlite.reflections import counted
from pipeline.store.sqlite.rollups import add_rollups, record_increments
from pipeline.store.sqlite.parts import SQLiteRepository
from schemas.documents import FormationRun, StageRecord, UsageRecord

# ``usage`` and ``user_ids`` of runs stored before the columns, from their documents; the same
# values ``run_columns`` writes (a stage with calls: its end, else start, else the run's
# creation, as a UTC day)
BACKFILL = """
UPDATE {runs} SET user_ids = coalesce(json_extract(doc, '$.user_ids'), '[]'), usage = (
    SELECT json_group_object(s.key, json_object(
        'day', substr(coalesce(json_extract(s.value, '$.finished_at'), json_extract(s.value, '$.started_at'),
                               json_extract({runs}.doc, '$.created_at')), 1, 10),
        'by_model', json(json_extract(s.value, '$.usage.by_model'))))
    FROM json_each({runs}.doc, '$.stages') s
    WHERE json_extract(s.value, '$.usage.by_model') IS NOT NULL AND json_extract(s.value, '$.usage.by_model') != '{{}}'
) WHERE usage IS NULL
"""


def _day(at: datetime) -> str:
    return c.utc(at).date().isoformat()


def stage_usage(run_created_at: datetime, record: StageRecord) -> dict | None:
    """A stage's entry of the ``usage`` column; None for a stage without calls."""
    if not record.usage.by_model:
        return None
    at = record.finished_at or record.started_at or run_created_at
    return {"day": _day(at), "by_model": record.usage.by_model}


def run_columns(run: FormationRun) -> tuple[str, str]:
    """(``usage``, ``user_ids``) of a run, as JSON text."""
    usage = {name: entry for name, record in run.stages.items()
             if (entry := stage_usage(run.created_at, record)) is not None}
    return json.dumps(usage), json.dumps(list(run.user_ids))


#: one per-model row's fields, read from a ``json_each`` row ``m`` (the group's sums follow)
_FIELDS = ("json_extract(m.value, '$.kind') AS kind, json_extract(m.value, '$.provider') AS provider, "
           "json_extract(m.value, '$.price') AS price, json_extract(m.value, '$.calls') AS calls, "
           "json_extract(m.value, '$.input_tokens') AS input_tokens, "
           "json_extract(m.value, '$.output_tokens') AS output_tokens, json_extract(m.value, '$.usd') AS usd, "
           "json_extract(m.value, '$.snapshots') AS snapshots")
#: a stage's name before any ``:`` ("consolidate:agent" is summed as "consolidate")
_STAGE = "substr({name}, 1, instr({name} || ':', ':') - 1)"


def _row(stage, day, model, kind, provider, price, calls, input_tokens, output_tokens, usd, unpriced,
         snapshots) -> CostRow:
    return CostRow(stage=stage, day=day, model=model, kind=kind or "llm", provider=provider or "",
                   price="unpriced" if unpriced else (price or "unpriced"), calls=int(calls or 0),
                   input_tokens=int(input_tokens or 0), output_tokens=int(output_tokens or 0),
                   usd=None if unpriced else round(float(usd or 0), 9),
                   snapshots=snapshots_of(json.loads(snapshots or "[]")))


def _conditions(agent: str, agent_id: str, *optional: tuple[str, Any]) -> tuple[list[str], list[Any]]:
    """The WHERE terms and their arguments: the agent's always, then each optional (term,
    value) whose value is set."""
    kept = [(agent, agent_id), *((term, value) for term, value in optional if value is not None)]
    return [term for term, _ in kept], [value for _, value in kept]


def keep_usage_rows(db: Database, conn: sqlite3.Connection, records: Sequence[UsageRecord]) -> None:
    """Write usage records (insert or replace) in ``conn``'s transaction, rolling nothing up:
    also what an erasure keeps of the runs it removes, whose spend is rolled up already."""
    conn.executemany(
        f"INSERT OR REPLACE INTO {db.t(c.USAGE)} (usage_id, agent_id, at, doc) VALUES (?, ?, ?, ?)",
        [(r.usage_id, r.agent_id, c.ts(r.at), r.model_dump_json()) for r in records])


class SQLiteStats(SQLiteRepository, StatsStore):
    """Usage records, ``cost_rows`` and ``reflection_counts``: a repository of ``SQLiteStore``
    on its ``Database``."""


    def record_usage(self, record: UsageRecord) -> None:
        with self.db.write() as conn:
            fresh = conn.execute(f"SELECT 1 FROM {self.db.t(c.USAGE)} WHERE usage_id = ?",
                                 (record.usage_id,)).fetchone() is None
            keep_usage_rows(self.db, conn, [record])
            if fresh:  # rolled up once, as it is first kept
                add_rollups(self.db, conn, record_increments(self.db, conn, record))

    def list_usage(self, agent_id: str, since: datetime | None = None) -> list[UsageRecord]:
        rows = self.db.conn().execute(
            f"SELECT doc FROM {self.db.t(c.USAGE)} WHERE agent_id = ? AND at >= ? ORDER BY at",
            (agent_id, c.ts(since) if since is not None else ""),
        ).fetchall()
        return [UsageRecord.model_validate_json(doc) for (doc,) in rows]

    def cost_rows(
        self, agent_id: str, *, since: datetime | None = None, until: datetime | None = None,
        user_id: str | None = None, session_id: str | None = None,
    ) -> list[CostRow]:
        runs, usage = self.db.t("runs"), self.db.t(c.USAGE)
        # runs: served by (agent_id, created_at), or (session_id, created_at) for a session
        start, end = (c.ts(t) if t is not None else None for t in (since, until))
        where, args = _conditions("r.agent_id = ?", agent_id, ("r.session_id = ?", session_id),
                                  ("r.created_at >= ?", start), ("r.created_at < ?", end),
                                  ("EXISTS (SELECT 1 FROM json_each(r.user_ids) WHERE value = ?)", user_id))
        run_rows = (
            f"SELECT {_STAGE.format(name='s.key')} AS stage, json_extract(s.value, '$.day') AS day, m.key AS model, "
            f"{_FIELDS} FROM {runs} r, json_each(r.usage) s, json_each(s.value, '$.by_model') m "
            f"WHERE {' AND '.join(where)}")
        # usage records: served by (agent_id, at), or the session's and run's expression indexes
        u_where, u_args = _conditions("u.agent_id = ?", agent_id, ("u.at >= ?", start), ("u.at < ?", end),
                                      ("json_extract(u.doc, '$.session_id') = ?", session_id))
        if user_id is not None:
            u_where.append(f"json_extract(u.doc, '$.run_id') IN (SELECT r.run_id FROM {runs} r WHERE {' AND '.join(where)})")
            u_args.extend(args)
        usage_stage = _STAGE.format(name="json_extract(u.doc, '$.stage')")
        usage_rows = (
            f"SELECT {usage_stage}, substr(u.at, 1, 10), m.key, {_FIELDS} "
            f"FROM {usage} u, json_each(u.doc, '$.by_model') m WHERE {' AND '.join(u_where)}")
        # summed in SQL: one row per stage, day and model comes back (pipeline.cost.add_rows'
        # rule: a sum with an unpriced row is unpriced)
        rows = self.db.conn().execute(
            "SELECT stage, day, model, MAX(kind), MAX(provider), MAX(price), SUM(calls), SUM(input_tokens), "
            "SUM(output_tokens), SUM(usd), SUM(usd IS NULL), "
            # the group's snapshot lists, as one JSON array of arrays
            "json_group_array(json(snapshots)) FILTER (WHERE snapshots IS NOT NULL) "
            f"FROM ({run_rows} UNION ALL {usage_rows}) GROUP BY stage, day, model ORDER BY stage, day, model",
            (*args, *u_args),
        ).fetchall()
        return [_row(*row) for row in rows]

    def reflection_counts(self, agent_id: str, scope_keys: Sequence[str]) -> dict[str, ReflectionCounts]:
        out = {key: ReflectionCounts(0, 0, None) for key in scope_keys}
        for key, total, unabsorbed, newest in counted(self.db, agent_id, scope_keys):
            out[key] = ReflectionCounts(total, unabsorbed, datetime.fromisoformat(newest) if newest else None)
        return out
