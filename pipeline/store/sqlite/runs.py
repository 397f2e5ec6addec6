"""The embedded store (design §7): one SQLite file, WAL mode, safe across threads and processes.

Every atomic method is one ``BEGIN IMMEDIATE`` transaction (see ``_sqlite_db``), so a
read-modify-write in Python is as atomic as a conditional update on a server. Documents are
kept as JSON with the queried columns beside them; embeddings as float32 bytes.

The hot path of a formation stage (``begin_stage``, ``complete_stage``) patches the run
document in place with SQLite's ``json_set`` (one stage record, the lease, the status) instead
of parsing and rewriting the whole run, whose stored stage outputs grow with every stage.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import NamedTuple

from pydantic import TypeAdapter

from pipeline.errors import ConfigurationError, InvalidInput
from pipeline.store import _common as c
from pipeline.store._sqlite_access import AccessMixin
from pipeline.store._sqlite_db import BUSY_TIMEOUT_S, Database, unavailable
from pipeline.store._sqlite_pool import borrowing
from pipeline.store._sqlite_stats import StatsMixin, run_columns, stage_usage
from pipeline.store._sqlite_erasure import ErasureMixin
from pipeline.store._sqlite_provenance import ProvenanceMixin
from pipeline.store._sqlite_memory import MemoryMixin
from pipeline.store._unavailable import translate_errors
from pipeline.store.port import IngestOutcome, Store, owned_by_another
from pipeline.trigger import ClaimRule
from schemas.documents import (
    AgentSettings,
    FormationRun,
    RejectedEvent,
    SessionState,
    StageRecord,
    StoredMessage,
    UsageRecord,
)


_DATETIME = TypeAdapter(datetime)
_IN_CHUNK = 500  # keys per lookup query of a batch


def _chunks(items: Sequence, size: int) -> list[Sequence]:
    return [items[i:i + size] for i in range(0, len(items), size)]


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


@translate_errors(unavailable)
@borrowing
class SQLiteStore(MemoryMixin, ErasureMixin, ProvenanceMixin, AccessMixin, StatsMixin, Store):
    """Every port method raises ``StoreUnavailable`` for a lock held past the busy timeout
    (``_sqlite_db.unavailable``), through the one decorator above."""

    def __init__(self, path: str, prefix: str = "memory2_", *, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.db = Database(path, prefix, busy_timeout_s=busy_timeout_s)

    @classmethod
    def from_url(cls, url: str, prefix: str = "memory2_", *, busy_timeout_s: float = BUSY_TIMEOUT_S) -> "SQLiteStore":
        """``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db`` or ``sqlite:///:memory:``."""
        if not url.startswith("sqlite:///") or len(url) <= len("sqlite:///"):
            raise ConfigurationError(f"store URL {url!r}: expected sqlite:///path/to/memory.db")
        return cls(url[len("sqlite:///"):], prefix=prefix, busy_timeout_s=busy_timeout_s)

    def create_indexes(self) -> list[str]:
        return self.db.create_schema()

    def close(self) -> None:
        self.db.close()

    # ------------------------------------------------------------------ agents -------------
    def get_agent_settings(self, agent_id: str) -> AgentSettings:
        row = self.db.conn().execute(
            f"SELECT doc FROM {self.db.t('agents')} WHERE agent_id = ?", (agent_id,)
        ).fetchone()
        return AgentSettings.model_validate_json(row[0]) if row else AgentSettings(agent_id=agent_id)

    def put_agent_settings(self, settings: AgentSettings) -> None:
        with self.db.write() as conn:
            conn.execute(
                f"INSERT OR REPLACE INTO {self.db.t('agents')} (agent_id, doc) VALUES (?, ?)",
                (settings.agent_id, settings.model_dump_json()),
            )

    # ------------------------------------------------------------------ ingest -------------
    def ingest_message(self, message: StoredMessage, now: datetime) -> IngestOutcome:
        return self.ingest_messages([message], now)[0]

    def ingest_messages(self, messages: Sequence[StoredMessage], now: datetime) -> list[IngestOutcome]:
        """The whole batch in one write transaction (all or nothing): a transaction costs far
        more than a message. The stored keys and sessions the batch names are read with a few
        queries, the batch is applied in order in memory (a message that repeats one of the
        batch is a duplicate of it), and the rows are written at the end."""
        table = self.db.t("messages")
        outcomes: list[IngestOutcome] = []
        rows: list[tuple] = []
        with self.db.write() as conn:
            # the session of each stored message whose event id / (session, message id) the batch names
            by_event: dict[str, str] = {}
            by_key: set[tuple[str, str]] = set()
            for chunk in _chunks(messages, _IN_CHUNK):
                by_event.update(conn.execute(
                    f"SELECT event_id, session_id FROM {table} WHERE event_id IN (SELECT value FROM json_each(?))",
                    (json.dumps([m.event_id for m in chunk]),),
                ).fetchall())
                by_key.update(conn.execute(
                    f"SELECT m.session_id, m.message_id FROM json_each(?) AS k JOIN {table} AS m "
                    "ON m.session_id = json_extract(k.value, '$[0]') AND m.message_id = json_extract(k.value, '$[1]')",
                    (json.dumps([[m.session_id, m.message_id] for m in chunk]),),
                ).fetchall())
            stored_sessions = self._sessions(conn, {m.session_id for m in messages} | set(by_event.values()))
            sessions: dict[str, SessionState] = {}  # those the batch changed, as they now stand

            def session_of(session_id: str, message: StoredMessage) -> SessionState:
                if session_id not in sessions:
                    sessions[session_id] = stored_sessions.get(session_id) or c.new_session(message)
                return sessions[session_id]

            for message in messages:
                owner = sessions.get(message.session_id) or stored_sessions.get(message.session_id)
                if owner is not None and owner.agent_id != message.agent_id:
                    outcomes.append(IngestOutcome(
                        status="rejected", seq=None, session=None, reason=owned_by_another(message.session_id)))
                    continue
                key = (message.session_id, message.message_id)
                stored_in = by_event.get(message.event_id) or (message.session_id if key in by_key else None)
                if stored_in is not None:
                    session = session_of(stored_in, message)
                    session = session.model_copy(update={"duplicates": session.duplicates + 1})
                    sessions[stored_in] = session
                    outcomes.append(IngestOutcome(status="duplicate", seq=None, session=session))
                    continue
                session = c.apply_message(session_of(message.session_id, message), message, now)
                sessions[message.session_id] = session
                by_event[message.event_id] = message.session_id
                by_key.add(key)
                stored = message.model_copy(update={"seq": session.last_seq})
                rows.append((stored.event_id, stored.session_id, stored.message_id, stored.agent_id, stored.seq,
                             stored.sender_id, c.ts(stored.created_at), stored.model_dump_json()))
                outcomes.append(IngestOutcome(status="accepted", seq=stored.seq, session=session))
            conn.executemany(
                f"INSERT INTO {table} (event_id, session_id, message_id, agent_id, seq, sender_id, "
                "created_at, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows,
            )
            self._put_sessions(conn, sessions.values())
        return outcomes

    def record_usage(self, record: UsageRecord) -> None:
        with self.db.write() as conn:
            conn.execute(
                f"INSERT OR REPLACE INTO {self.db.t(c.USAGE)} (usage_id, agent_id, at, doc) VALUES (?, ?, ?, ?)",
                (record.usage_id, record.agent_id, c.ts(record.at), record.model_dump_json()),
            )

    def list_usage(self, agent_id: str, since: datetime | None = None) -> list[UsageRecord]:
        rows = self.db.conn().execute(
            f"SELECT doc FROM {self.db.t(c.USAGE)} WHERE agent_id = ? AND at >= ? ORDER BY at",
            (agent_id, c.ts(since) if since is not None else ""),
        ).fetchall()
        return [UsageRecord.model_validate_json(doc) for (doc,) in rows]

    def record_rejection(self, rejected: RejectedEvent) -> None:
        with self.db.write() as conn:
            conn.execute(
                f"INSERT OR REPLACE INTO {self.db.t('rejected')} (rejection_id, received_at, doc) VALUES (?, ?, ?)",
                (rejected.rejection_id, c.ts(rejected.received_at), rejected.model_dump_json()),
            )

    def list_rejections(self, limit: int = 100) -> list[RejectedEvent]:
        rows = self.db.conn().execute(
            f"SELECT doc FROM {self.db.t('rejected')} ORDER BY received_at DESC LIMIT ?", (limit,)
        ).fetchall()
        return [RejectedEvent.model_validate_json(doc) for (doc,) in rows]

    def delete_rejections(self, rejection_ids: Sequence[str]) -> int:
        with self.db.write() as conn:
            return conn.execute(
                f"DELETE FROM {self.db.t('rejected')} WHERE rejection_id IN (SELECT value FROM json_each(?))",
                (json.dumps(list(rejection_ids)),),
            ).rowcount

    def get_messages(self, session_id: str, seq_from: int, seq_to: int) -> list[StoredMessage]:
        rows = self.db.conn().execute(
            f"SELECT doc FROM {self.db.t('messages')} WHERE session_id = ? AND seq BETWEEN ? AND ? "
            "ORDER BY created_at, seq",
            (session_id, seq_from, seq_to),
        ).fetchall()
        return [StoredMessage.model_validate_json(doc) for (doc,) in rows]

    def count_messages(self, session_id: str) -> int:
        return self.db.conn().execute(
            f"SELECT COUNT(*) FROM {self.db.t('messages')} WHERE session_id = ?", (session_id,)
        ).fetchone()[0]

    # ------------------------------------------------------------------ sessions -----------
    def _session(self, conn: sqlite3.Connection, session_id: str) -> SessionState | None:
        row = conn.execute(
            f"SELECT doc FROM {self.db.t('sessions')} WHERE session_id = ?", (session_id,)
        ).fetchone()
        return SessionState.model_validate_json(row[0]) if row else None

    def put_session_row(self, conn: sqlite3.Connection, s: SessionState) -> None:
        self._put_sessions(conn, [s])

    def _put_sessions(self, conn: sqlite3.Connection, sessions: Iterable[SessionState]) -> None:
        conn.executemany(
            f"INSERT OR REPLACE INTO {self.db.t('sessions')} (session_id, agent_id, last_activity_at, "
            "unclaimed, active_run_id, doc) VALUES (?, ?, ?, ?, ?, ?)",
            [(s.session_id, s.agent_id, c.ts(s.last_activity_at), s.last_seq - s.claimed_through,
              s.active_run_id, s.model_dump_json()) for s in sessions],
        )

    def _sessions(self, conn: sqlite3.Connection, session_ids: set[str]) -> dict[str, SessionState]:
        """The stored ones of these sessions, by id."""
        ids = sorted(session_ids)
        found: dict[str, SessionState] = {}
        for chunk in _chunks(ids, _IN_CHUNK):
            for (doc,) in conn.execute(
                f"SELECT doc FROM {self.db.t('sessions')} WHERE session_id IN (SELECT value FROM json_each(?))",
                (json.dumps(chunk),),
            ).fetchall():
                session = SessionState.model_validate_json(doc)
                found[session.session_id] = session
        return found

    def get_session(self, session_id: str) -> SessionState | None:
        return self._session(self.db.conn(), session_id)

    def declare_session_users(self, session_id: str, agent_id: str, user_ids: Sequence[str]) -> SessionState:
        with self.db.write() as conn:
            stored = self._session(conn, session_id)
            if stored is not None and stored.agent_id != agent_id:
                raise InvalidInput("session_id", owned_by_another(session_id))
            session = stored or SessionState(session_id=session_id, agent_id=agent_id)
            users = c.merge_users(session.users, user_ids)
            if stored is None or users != session.users:
                session = session.model_copy(update={"users": users})
                self.put_session_row(conn, session)
            return session

    def mark_session_ended(self, session_id: str, now: datetime, agent_id: str | None = None) -> SessionState | None:
        with self.db.write() as conn:
            session = self._session(conn, session_id)
            if session is None:
                return None
            if agent_id is not None and session.agent_id != agent_id:
                raise InvalidInput("session_id", owned_by_another(session_id))
            if session.ended_at is None:
                session = c.ended(session, now)
                self.put_session_row(conn, session)
            return session

    def find_cold_sessions(self, idle_before: datetime, min_messages: int, limit: int) -> list[str]:
        rows = self.db.conn().execute(
            f"SELECT session_id FROM {self.db.t('sessions')} WHERE active_run_id IS NULL "
            "AND last_activity_at <= ? AND unclaimed >= ? AND unclaimed > 0 "
            "ORDER BY last_activity_at LIMIT ?",
            (c.ts(idle_before), min_messages, limit),
        ).fetchall()
        return [sid for (sid,) in rows]

    # ------------------------------------------------------------------ claims & runs -------
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
            session = self._session(conn, session_id)
            if session is None or session.agent_id != run.agent_id or self._claim_holder(conn, session) is not None:
                return None
            if not c.rule_holds(session, rule):
                return None
            if self._run(conn, run.run_id) is not None:
                return None  # a run id is used once
            stored = c.claimed_run(session, run, now, lease_s)
            self.put_run_row(conn, stored)
            self.put_session_row(conn, c.after_claim(session, stored))
            return stored

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
            session = self._session(conn, run.session_id)
            if session is not None and session.active_run_id == run_id:
                self.put_session_row(conn, session.model_copy(update={"lease_expires_at": until}))
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
            created = conn.execute(f"SELECT created_at FROM {runs} WHERE run_id = ?", (run_id,)).fetchone()[0]
            entry = stage_usage(datetime.fromisoformat(created), done)
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
        session = self._session(conn, run.session_id)
        if session is None:
            return
        update: dict = {}
        if watermark:
            update["watermark"] = max(session.watermark, run.seq_to)
        if session.active_run_id == run.run_id:
            update.update(active_run_id=None, lease_expires_at=None)
        if update:
            self.put_session_row(conn, session.model_copy(update=update))

    def finish_run(self, run_id: str, now: datetime, totals: dict, changed_scope_keys: Sequence[str]) -> bool:
        with self.db.write() as conn:
            run = self._run_head(conn, run_id)
            if run is None:
                raise KeyError(f"run {run_id!r} does not exist")
            if run.status == "done":
                return False
            self.release_claim(conn, run, watermark=True)
            self.bump_stamps(conn, run.agent_id, changed_scope_keys)
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
            session = self._session(conn, run.session_id)
            holder = self._claim_holder(conn, session) if session is not None else None
            if holder is not None and holder.run_id != run_id:
                return None, None
            until = c.lease_until(now, lease_s)
            reopened = run.model_copy(update={
                "status": "claimed", "attempts": 1 if reset_attempts else run.attempts + 1,
                "lease_expires_at": until, "finished_at": None,
            })
            if session is not None:
                self.put_session_row(conn, session.model_copy(update={"active_run_id": run_id, "lease_expires_at": until}))
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
