"""The SQLite side of the statistics port (``port_stats``): sums and counts in SQL.

A run's document holds every stage's output (vectors included: 14 kB on average in the soak),
so summing its calls through the document would parse all of it. Two columns beside it keep
what the sums read: ``usage`` (per stage with calls: the day and the per-model rows) and
``user_ids``, written with the document (``run_columns``, ``stage_usage``), filled from the
documents of a file made before them (``BACKFILL``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from pipeline.store import _common as c
from pipeline.store.port_stats import CostRow, ReflectionCounts, cost_row
from schemas.documents import FormationRun, StageRecord

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


def _grouped(rows) -> list[CostRow]:
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for stage, day, model, row in rows:
        groups.setdefault((stage.split(":")[0], day, model), []).append(json.loads(row))
    return [cost_row(stage, day, model, found) for (stage, day, model), found in sorted(groups.items())]


class StatsMixin:
    """``cost_rows`` and ``reflection_counts`` for ``SQLiteStore`` (``self.db``)."""

    def cost_rows(
        self, agent_id: str, *, since: datetime | None = None, until: datetime | None = None,
        user_id: str | None = None, session_id: str | None = None,
    ) -> list[CostRow]:
        runs, usage = self.db.t("runs"), self.db.t(c.USAGE)
        # runs: served by (agent_id, created_at), or (session_id, created_at) for a session
        where, args = ["r.agent_id = ?"], [agent_id]
        if session_id is not None:
            where.append("r.session_id = ?")
            args.append(session_id)
        if since is not None:
            where.append("r.created_at >= ?")
            args.append(c.ts(since))
        if until is not None:
            where.append("r.created_at < ?")
            args.append(c.ts(until))
        if user_id is not None:
            where.append("EXISTS (SELECT 1 FROM json_each(r.user_ids) WHERE value = ?)")
            args.append(user_id)
        run_rows = (
            f"SELECT s.key, json_extract(s.value, '$.day'), m.key, m.value "
            f"FROM {runs} r, json_each(r.usage) s, json_each(s.value, '$.by_model') m WHERE {' AND '.join(where)}")
        # usage records: served by (agent_id, at), or the session's and run's expression indexes
        u_where, u_args = ["u.agent_id = ?"], [agent_id]
        if since is not None:
            u_where.append("u.at >= ?")
            u_args.append(c.ts(since))
        if until is not None:
            u_where.append("u.at < ?")
            u_args.append(c.ts(until))
        if session_id is not None:
            u_where.append("json_extract(u.doc, '$.session_id') = ?")
            u_args.append(session_id)
        if user_id is not None:
            u_where.append(f"json_extract(u.doc, '$.run_id') IN (SELECT r.run_id FROM {runs} r WHERE {' AND '.join(where)})")
            u_args.extend(args)
        usage_rows = (
            f"SELECT json_extract(u.doc, '$.stage'), substr(u.at, 1, 10), m.key, m.value "
            f"FROM {usage} u, json_each(u.doc, '$.by_model') m WHERE {' AND '.join(u_where)}")
        rows = self.db.conn().execute(f"{run_rows} UNION ALL {usage_rows}", (*args, *u_args)).fetchall()
        return _grouped(rows)

    def reflection_counts(self, agent_id: str, scope_keys: Sequence[str]) -> dict[str, ReflectionCounts]:
        out = {key: ReflectionCounts(0, 0, None) for key in scope_keys}
        if not scope_keys:
            return out
        # served by (agent_id, scope_key, absorbed, formed_at): counted from the index alone
        rows = self.db.conn().execute(
            f"SELECT scope_key, COUNT(*), SUM(absorbed = 0), MAX(formed_at) FROM {self.db.t('reflections')} "
            f"WHERE agent_id = ? AND scope_key IN ({', '.join('?' for _ in scope_keys)}) GROUP BY scope_key",
            (agent_id, *scope_keys),
        ).fetchall()
        for key, total, unabsorbed, newest in rows:
            out[key] = ReflectionCounts(int(total), int(unabsorbed or 0), datetime.fromisoformat(newest) if newest else None)
        return out
