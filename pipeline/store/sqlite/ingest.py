"""SQLite store, ingest: agents' settings, messages, sessions and rejected events (the
``IngestStore`` port). A repository of ``SQLiteStore``; ``self.db`` is its ``Database``.

A batch of messages is stored in one write transaction (all or nothing): a transaction costs
far more than a message.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from datetime import datetime

from pipeline.errors import InvalidInput
from pipeline.store import _common as c
from pipeline.store.ports.ingest import IngestOutcome, IngestStore, owned_by_another
from pipeline.store.sqlite.db import Database, chunks
from pipeline.store.sqlite.parts import SQLiteRepository
from schemas.documents import AgentSettings, RejectedEvent, SessionState, StoredMessage


class SQLiteIngest(SQLiteRepository, IngestStore):

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
            for chunk in chunks(messages):
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
    def session_row(self, conn: sqlite3.Connection, session_id: str) -> SessionState | None:
        """The stored session, read inside ``conn``'s transaction."""
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
        for chunk in chunks(ids):
            for (doc,) in conn.execute(
                f"SELECT doc FROM {self.db.t('sessions')} WHERE session_id IN (SELECT value FROM json_each(?))",
                (json.dumps(chunk),),
            ).fetchall():
                session = SessionState.model_validate_json(doc)
                found[session.session_id] = session
        return found

    def get_session(self, session_id: str) -> SessionState | None:
        return self.session_row(self.db.conn(), session_id)

    def declare_session_users(self, session_id: str, agent_id: str, user_ids: Sequence[str]) -> SessionState:
        with self.db.write() as conn:
            stored = self.session_row(conn, session_id)
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
            session = self.session_row(conn, session_id)
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
