"""SQLite store, claims and formation runs (the ``RunStore`` port). A repository of
``SQLiteStore``; ``self.db`` is its ``Database``.

The hot path of a formation stage (``begin_stage``, ``complete_stage``) patches the run
document in place with SQLite's ``json_set`` (one stage record, the lease, the status) instead
of parsing and rewriting the whole run, whose stored stage outputs grow with every stage.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from pydantic import TypeAdapter

from pipeline.store import _common as c
from pipeline.store.ports.runs import RunStore
from pipeline.store.sqlite.db import Database
from pipeline.store.sqlite.parts import SQLiteRepository
from pipeline.store.ports.rollups import increments
from pipeline.store.sqlite.rollups import add_rollups
from pipeline.store.sqlite.stats import run_columns, stage_usage
from pipeline.trigger import ClaimRule
from schemas.documents import FormationRun, SessionState, StageRecord


_DATETIME = TypeAdapter(datetime)


def _json_time(value: datetime) -> str:
    """A time as pydantic writes it inside a document (for ``json_set`` patches)."""
    return _DATETIME.dump_json(c.utc(value)).decode()


# run fields that are also key columns beside the document: changed by rewriting the row
_RUN_KEYS = {"run_id", "agent_id", "session_id", "created_at"}


class _RunHead(NamedTuple):
    """What closing a run needs of it, read without parsing its stage outputs."""

    run_id: str
    status: str
    agent_id: str
    session_id: str
    seq_to: int


def _usage_path(stage: str) -> str:
    _stage_path(stage)  # the same rule for the name
    return f'$."{stage}"'


def _stage_path(stage: str) -> str:
    if '"' in stage:
        raise ValueError(f"stage name {stage!r} must not contain a double quote")
    return f'$.stages."{stage}"'


class SQLiteRuns(SQLiteRepository, RunStore):

    def _run(self, conn: sqlite3.Connection, run_id: str) -> FormationRun | None:
        row = conn.execute(f"SELECT doc FROM {self.db.t('runs')} WHERE run_id = ?", (run_id,)).fetchone()
        return FormationRun.model_validate_json(row[0]) if row else None

    def put_run_row(self, conn: sqlite3.Connection, run: FormationRun) -> None:
        conn.execute(
            f"INSERT OR REPLACE INTO {self.db.t('runs')} (run_id, agent_id, session_id, status, "
            "lease_expires_at, created_at, doc, usage, user_ids) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (run.run_id, run.agent_id, run.session_id, run.status, c.ts(run.lease_expires_at),
             c.ts(run.created_at), run.model_dump_json(), *run_columns(run)),
        )

    def _claim_holder(self, conn: sqlite3.Connection, session: SessionState) -> FormationRun | None:
        """The run that holds the session's claim, if it is still claimed/running (even with
        an expired lease: a stale run is taken over by ``reopen_run``, never skipped)."""
        if session.active_run_id is None:
            return None
        holder = self._run(conn, session.active_run_id)
        return holder if holder is not None and holder.status in c.ACTIVE_RUN_STATUSES else None

    def try_claim(
        self, session_id: str, rule: ClaimRule, run: FormationRun, now: datetime, lease_s: float
    ) -> FormationRun | None:
        with self.db.write() as conn:
            session = self.parts.ingest.session_row(conn, session_id)
            if session is None or session.agent_id != run.agent_id or self._claim_holder(conn, session) is not None:
                return None
            if not c.rule_holds(session, rule):
                return None
            if self._run(conn, run.run_id) is not None:
                return None  # a run id is used once
            stored = c.claimed_run(session, run, now, lease_s)
            self.put_run_row(conn, stored)
            self.parts.ingest.put_session_row(conn, c.after_claim(session, stored))
            return stored

    def insert_run(self, run: FormationRun) -> bool:
        with self.db.write() as conn:
            if self._run(conn, run.run_id) is not None:
                return False
            self.put_run_row(conn, run)
            return True

    def get_run(self, run_id: str) -> FormationRun | None:
        return self._run(self.db.conn(), run_id)

    def run_status(self, run_id: str) -> str | None:
        row = self.db.conn().execute(f"SELECT status FROM {self.db.t('runs')} WHERE run_id = ?", (run_id,)).fetchone()
        return row[0] if row else None

    def _modify_run(self, run_id: str, change) -> object:
        """Apply ``change(conn, run)`` to a run inside one write transaction. ``change`` returns
        (new run or None to keep, result)."""
        with self.db.write() as conn:
            run = self._run(conn, run_id)
            if run is None:
                raise KeyError(f"run {run_id!r} does not exist")
            updated, result = change(conn, run)
            if updated is not None:
                self.put_run_row(conn, updated)
            return result

    def update_run_fields(self, run_id: str, **fields: object) -> None:
        unknown = set(fields) - set(FormationRun.model_fields)
        if unknown:
            raise ValueError(f"update_run_fields: unknown run fields {sorted(unknown)}")

        if set(fields) & _RUN_KEYS:
            def change(conn, run):
                data = run.model_dump()
                data.update(fields)
                return FormationRun.model_validate(data), None

            self._modify_run(run_id, change)
            return
        with self.db.write() as conn:
            self._patch_run(conn, run_id, fields)

    def _patch_run(self, conn: sqlite3.Connection, run_id: str, fields: dict[str, object]) -> None:
        """Set top-level fields of a run in place (its document is not parsed or rewritten by
        Python, and its stage outputs are not serialised again), and the status and lease
        columns with them. ``KeyError`` for an unknown run."""
        if not fields:
            if conn.execute(f"SELECT 1 FROM {self.db.t('runs')} WHERE run_id = ?", (run_id,)).fetchone() is None:
                raise KeyError(f"run {run_id!r} does not exist")
            return
        checked = {name: c.run_field(name, value) for name, value in fields.items()}
        sets = ["doc = json_set(doc, " + ", ".join(f"'$.{name}', json(?)" for name in checked) + ")"]
        args: list[object] = [adapter.dump_json(value).decode() for adapter, value in checked.values()]
        if "status" in checked:
            sets.append("status = ?")
            args.append(checked["status"][1])
        if "lease_expires_at" in checked:
            sets.append("lease_expires_at = ?")
            args.append(c.ts(checked["lease_expires_at"][1]))  # type: ignore[arg-type]
        if "user_ids" in checked:
            sets.append("user_ids = ?")
            args.append(json.dumps(list(checked["user_ids"][1])))  # type: ignore[arg-type]
        changed = conn.execute(f"UPDATE {self.db.t('runs')} SET {', '.join(sets)} WHERE run_id = ?",
                               (*args, run_id)).rowcount
        if not changed:
            raise KeyError(f"run {run_id!r} does not exist")

    def _run_head(self, conn: sqlite3.Connection, run_id: str) -> _RunHead | None:
        row = conn.execute(
            f"SELECT run_id, status, agent_id, session_id, json_extract(doc, '$.seq_to') FROM {self.db.t('runs')} "
            "WHERE run_id = ?", (run_id,),
        ).fetchone()
        return _RunHead(*row) if row else None

    def renew_run_lease(self, run_id: str, now: datetime, lease_s: float) -> bool:
        def change(conn, run):
            if run.status not in c.ACTIVE_RUN_STATUSES:
                return None, False
            until = c.lease_until(now, lease_s)
            session = self.parts.ingest.session_row(conn, run.session_id)
            if session is not None and session.active_run_id == run_id:
                self.parts.ingest.put_session_row(conn, session.model_copy(update={"lease_expires_at": until}))
            return run.model_copy(update={"lease_expires_at": until}), True

        try:
            return self._modify_run(run_id, change)
        except KeyError:
            return False  # a run that is gone is no longer active either

    def begin_stage(
        self, run_id: str, stage: str, now: datetime, lease_s: float
    ) -> tuple[FormationRun, StageRecord] | None:
        """Renew the lease and start the stage in one write transaction, patching the run and
        the session in place (their documents are not rewritten)."""
        path = _stage_path(stage)
        runs = self.db.t("runs")
        with self.db.write() as conn:
            run = self._run(conn, run_id)
            if run is None or run.status not in c.ACTIVE_RUN_STATUSES:
                return None
            until = c.lease_until(now, lease_s)
            conn.execute(
                f"UPDATE {self.db.t('sessions')} SET doc = json_set(doc, '$.lease_expires_at', json(?)) "
                "WHERE session_id = ? AND active_run_id = ?", (_json_time(until), run.session_id, run_id),
            )
            record = c.started(run.stages.get(stage), now)
            if record is None:
                conn.execute(
                    f"UPDATE {runs} SET lease_expires_at = ?, doc = json_set(doc, '$.lease_expires_at', json(?)) "
                    "WHERE run_id = ?", (c.ts(until), _json_time(until), run_id),
                )
                return run.model_copy(update={"lease_expires_at": until}), run.stages[stage]
            status = c.running_status(run.status)
            conn.execute(
                f"UPDATE {runs} SET status = ?, lease_expires_at = ?, doc = json_set(doc, '$.status', ?, "
                "'$.lease_expires_at', json(?), ?, json(?)) WHERE run_id = ?",
                (status, c.ts(until), status, _json_time(until), path, record.model_dump_json(), run_id),
            )
            return run.model_copy(update={
                "stages": {**run.stages, stage: record}, "status": status, "lease_expires_at": until,
            }), record

    def start_stage(self, run_id: str, stage: str, now: datetime) -> StageRecord:
        def change(conn, run):
            record = c.started(run.stages.get(stage), now)
            if record is None:
                return None, run.stages[stage]
            status = c.running_status(run.status)
            return run.model_copy(update={"stages": {**run.stages, stage: record}, "status": status}), record

        return self._modify_run(run_id, change)

    def complete_stage(self, run_id: str, stage: str, record: StageRecord) -> bool:
        path = _stage_path(stage)
        runs = self.db.t("runs")
        with self.db.write() as conn:
            row = conn.execute(f"SELECT json_extract(doc, ?) FROM {runs} WHERE run_id = ?", (path, run_id)).fetchone()
            if row is None:
                raise KeyError(f"run {run_id!r} does not exist")
            current = StageRecord.model_validate_json(row[0]) if row[0] is not None else None
            done = c.completed(current, record)
            if done is None:
                return False
            created, agent_id, session_id, users = conn.execute(
                f"SELECT created_at, agent_id, session_id, user_ids FROM {runs} WHERE run_id = ?", (run_id,)).fetchone()
            entry = stage_usage(datetime.fromisoformat(created), done)
            if entry is not None:  # rolled up in the write that records it: once, as the stage completes once
                add_rollups(self.db, conn, increments(agent_id, session_id, json.loads(users or "[]"), stage,
                                                      entry["day"], entry["by_model"]))
            conn.execute(f"UPDATE {runs} SET doc = json_set(doc, ?, json(?)), "
                         "usage = CASE WHEN ? IS NULL THEN json_remove(coalesce(usage, '{}'), ?) "
                         "ELSE json_set(coalesce(usage, '{}'), ?, json(?)) END WHERE run_id = ?",
                         (path, done.model_dump_json(), json.dumps(entry) if entry else None, _usage_path(stage),
                          _usage_path(stage), json.dumps(entry), run_id))
            return True

    def fail_stage(self, run_id: str, stage: str, error: str, now: datetime) -> None:
        def change(conn, run):
            record = run.stages.get(stage) or StageRecord()
            if record.status == "done":
                return None, None
            record = record.model_copy(update=c.failed_fields(error, now))
            return run.model_copy(update={"stages": {**run.stages, stage: record}}), None

        self._modify_run(run_id, change)

    def release_claim(self, conn: sqlite3.Connection, run: FormationRun | _RunHead, watermark: bool) -> None:
        session = self.parts.ingest.session_row(conn, run.session_id)
        if session is None:
            return
        update: dict = {}
        if watermark:
            update["watermark"] = max(session.watermark, run.seq_to)
        if session.active_run_id == run.run_id:
            update.update(active_run_id=None, lease_expires_at=None)
        if update:
            self.parts.ingest.put_session_row(conn, session.model_copy(update=update))

    def finish_run(self, run_id: str, now: datetime, totals: dict, changed_scope_keys: Sequence[str]) -> bool:
        with self.db.write() as conn:
            run = self._run_head(conn, run_id)
            if run is None:
                raise KeyError(f"run {run_id!r} does not exist")
            if run.status == "done":
                return False
            self.release_claim(conn, run, watermark=True)
            self.parts.leases.bump_stamps(conn, run.agent_id, changed_scope_keys)
            self._patch_run(conn, run_id, {"status": "done", "finished_at": c.utc(now), "totals": dict(totals),
                                           "lease_expires_at": None, "error": None})
            return True

    def fail_run(self, run_id: str, error: str, now: datetime, *, dead: bool) -> None:
        def change(conn, run):
            if run.status == "done":
                return None, None
            self.release_claim(conn, run, watermark=False)
            return run.model_copy(update={
                "status": "dead" if dead else "failed", "error": error, "lease_expires_at": None,
                "finished_at": c.utc(now),
            }), None

        self._modify_run(run_id, change)

    def reopen_run(
        self, run_id: str, now: datetime, lease_s: float, *, reset_attempts: bool = False
    ) -> FormationRun | None:
        def change(conn, run):
            if run.status in c.FINAL_RUN_STATUSES:
                return None, None
            if run.status in c.ACTIVE_RUN_STATUSES and run.lease_expires_at is not None \
                    and c.utc(run.lease_expires_at) > c.utc(now):
                return None, None  # its worker still holds a live lease
            session = self.parts.ingest.session_row(conn, run.session_id)
            holder = self._claim_holder(conn, session) if session is not None else None
            if holder is not None and holder.run_id != run_id:
                return None, None
            until = c.lease_until(now, lease_s)
            reopened = run.model_copy(update={
                "status": "claimed", "attempts": 1 if reset_attempts else run.attempts + 1,
                "lease_expires_at": until, "finished_at": None,
            })
            if session is not None:
                self.parts.ingest.put_session_row(conn, session.model_copy(update={"active_run_id": run_id, "lease_expires_at": until}))
            return reopened, reopened

        try:
            return self._modify_run(run_id, change)
        except KeyError:
            return None

    def find_stale_runs(self, now: datetime, limit: int) -> list[FormationRun]:
        rows = self.db.conn().execute(
            f"SELECT doc FROM {self.db.t('runs')} WHERE (status IN ('claimed', 'running') AND "
            "lease_expires_at < ?) OR status = 'failed' ORDER BY created_at LIMIT ?",
            (c.ts(now), limit),
        ).fetchall()
        return [FormationRun.model_validate_json(doc) for (doc,) in rows]

    def list_runs(
        self, *, status: str | None = None, agent_id: str | None = None,
        session_id: str | None = None, limit: int = 50,
    ) -> list[FormationRun]:
        where, args = [], []
        for column, value in (("status", status), ("agent_id", agent_id), ("session_id", session_id)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = self.db.conn().execute(
            f"SELECT doc FROM {self.db.t('runs')} {clause} ORDER BY created_at DESC, rowid DESC LIMIT ?",
            (*args, limit),
        ).fetchall()
        return [FormationRun.model_validate_json(doc) for (doc,) in rows]
