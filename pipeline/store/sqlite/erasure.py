"""SQLite store, erasure and audit: ``forget_user``, ``erase_memory`` and ``dump_all`` (the
``AdminStore`` port; the store class adds its lifecycle). A repository of ``SQLiteStore``;
the row writes it shares with the other repositories are ``parts.SQLiteParts``."""

from __future__ import annotations

import json
import sqlite3

from pipeline import erasure, vectors
from pipeline.erasure import Plan
from pipeline.store.ports.admin import AdminStore
from pipeline.store.sqlite.db import Database
from pipeline.store.sqlite.parts import SQLiteRepository
from pipeline.store.sqlite.rollups import TABLE as ROLLUPS
from pipeline.store.sqlite.schema import TABLES
from pipeline.store.sqlite.stats import keep_usage_rows
from schemas.documents import FormationRun, RejectedEvent, SessionState, StoredMessage, scope_key


class _DryRun(Exception):
    """Raised at the end of a dry run's transaction: ``Database.write`` rolls it back."""


def _in(values: list[str]) -> str:
    return ", ".join("?" for _ in values) or "NULL"


class SQLiteErasure(SQLiteRepository, AdminStore):

    def _user_sessions(self, conn: sqlite3.Connection, user_id: str, agent_id: str | None) -> dict[str, str]:
        """session id -> agent id of every session the user was in."""
        agent_clause, args = ("AND agent_id = ?", [agent_id]) if agent_id else ("", [])
        rows = conn.execute(  # the user lists through the provenance index (``provenance``)
            f"SELECT session_id, agent_id FROM {self.db.t('sessions')} WHERE session_id IN "
            f"(SELECT item_id FROM {self.db.t('user_refs')} WHERE user_id = ? AND kind = 'sessions') {agent_clause} "
            f"UNION SELECT session_id, agent_id FROM {self.db.t('messages')} WHERE sender_id = ? {agent_clause}",
            (user_id, *args, user_id, *args),
        ).fetchall()
        return dict(rows)

    def _humans(self, conn: sqlite3.Connection, session_id: str) -> set[str | None]:
        """Every human of a session: its user list and the senders of its user turns."""
        row = conn.execute(f"SELECT doc FROM {self.db.t('sessions')} WHERE session_id = ?", (session_id,)).fetchone()
        humans = set(SessionState.model_validate_json(row[0]).users) if row else set()
        humans.update(sender for (sender,) in conn.execute(
            f"SELECT DISTINCT sender_id FROM {self.db.t('messages')} WHERE session_id = ? "
            "AND json_extract(doc, '$.role') = 'user'", (session_id,)).fetchall())
        return humans

    def _user_data(self, conn: sqlite3.Connection, user_id: str, agent_id: str | None) -> erasure.UserData:
        """What ``pipeline.erasure.forget_plan`` decides on, read in the erasure's transaction."""
        t = self.db.t
        sessions = self._user_sessions(conn, user_id, agent_id)
        # through the provenance index (``provenance``): the runs naming the user, those
        # of their sessions, and the rejected events whose payload names them
        named = [i for (i,) in conn.execute(f"SELECT item_id FROM {t('user_refs')} WHERE user_id = ? AND kind = 'runs'",
                                            (user_id,))]
        runs = [FormationRun.model_validate_json(doc) for (doc,) in conn.execute(
            f"SELECT doc FROM {t('runs')} WHERE run_id IN ({_in(named)}) "
            f"UNION SELECT doc FROM {t('runs')} WHERE session_id IN ({_in(list(sessions))})", [*named, *sessions])]
        naming = self.parts.provenance.rejected_naming(user_id, agent_id)
        rejected = [RejectedEvent.model_validate_json(d) for (d,) in conn.execute(
            f"SELECT doc FROM {t('rejected')} WHERE rejection_id IN ({_in(naming)})", naming)]
        stamped = conn.execute(f"SELECT agent_id FROM {t('scope_versions')} WHERE scope_key = ?",
                               (scope_key("user", user_id=user_id),)).fetchall()
        return erasure.UserData(
            sessions=sessions, humans={sid: self._humans(conn, sid) for sid in sessions}, runs=runs,
            rejected=[(e.rejection_id, e.agent_id, e.raw) for e in rejected], stamped=[a for (a,) in stamped],
            leases=[name for (name,) in conn.execute(f"SELECT name FROM {t('leases')}")],
        )

    def forget_user(self, user_id: str, agent_id: str | None = None, *, dry_run: bool = False) -> dict[str, int]:
        counts: dict[str, int] = {}
        try:
            with self.db.write() as conn:
                self._forget(conn, user_id, agent_id, counts)
                if dry_run:  # the same statements, counted, then rolled back: the plan is the result
                    raise _DryRun()
        except _DryRun:
            pass
        return counts

    def user_data(self, user_id: str, agent_id: str | None = None) -> erasure.UserData:
        with self.db.read() as conn:
            return self._user_data(conn, user_id, agent_id)

    def _forget(self, conn: sqlite3.Connection, user_id: str, agent_id: str | None, counts: dict[str, int]) -> None:
        t = self.db.t
        agent_clause, agent_args = ("AND agent_id = ?", [agent_id]) if agent_id else ("", [])
        plan = erasure.forget_plan(user_id, agent_id, self._user_data(conn, user_id, agent_id))
        solo, group, sids = list(plan.solo), plan.group, plan.session_ids

        counts["facts"] = conn.execute(
            f"DELETE FROM {t('facts')} WHERE scope_key = ? {agent_clause}", (plan.user_key, *agent_args),
        ).rowcount
        for table in ("reflections", "consolidated"):
            counts[table] = conn.execute(
                f"DELETE FROM {t(table)} WHERE scope_key = ? {agent_clause}", (plan.user_key, *agent_args),
            ).rowcount
            for sid, agent in plan.solo.items():
                counts[table] += conn.execute(
                    f"DELETE FROM {t(table)} WHERE scope_key = ? AND agent_id = ?",
                    (scope_key("session", session_id=sid), agent),
                ).rowcount

        counts.update(self._forget_messages(conn, user_id, agent_id, solo, group))

        # Runs quote the user: see ``pipeline.erasure.forget_plan`` for which go and which stay emptied.
        # What they spent stays, anonymous, so the agent's cost totals never fall.
        # The agent's roll-ups keep it too; the user's own, and their one-to-one sessions', go.
        keep_usage_rows(self.db, conn, plan.usage)
        conn.execute(f"DELETE FROM {t(ROLLUPS)} WHERE scope = 'user' AND scope_id = ? {agent_clause}",
                     (user_id, *agent_args))
        conn.executemany(f"DELETE FROM {t(ROLLUPS)} WHERE scope = 'session' AND scope_id = ? AND agent_id = ?",
                         list(plan.solo.items()))
        counts["runs_deleted"] = conn.execute(
            f"DELETE FROM {t('runs')} WHERE run_id IN ({_in(plan.delete_runs)})", plan.delete_runs,
        ).rowcount
        counts["runs_rewritten"] = len(plan.rewrite_runs)
        for run in plan.rewrite_runs:
            self.parts.runs.release_claim(conn, run, watermark=False)
            self.parts.runs.put_run_row(conn, run)
        counts["rejected"] = conn.execute(
            f"DELETE FROM {t('rejected')} WHERE rejection_id IN ({_in(plan.rejected_ids)})", plan.rejected_ids,
        ).rowcount

        context_agent = " AND json_extract(doc, '$.agent_id') = ?" if agent_id else ""
        counts["contexts"] = conn.execute(
            f"DELETE FROM {t('contexts')} WHERE (user_id = ?{context_agent}) OR session_id IN ({_in(sids)})",
            (user_id, *agent_args, *sids),
        ).rowcount

        counts["sessions_rewritten"] = self._forget_in_sessions(conn, user_id, sids)

        # The stamp of the user's scope names the user: drop it, and move the agent and
        # session stamps instead so that every cache built over the erased data is stale.
        counts["scope_versions"] = conn.execute(
            f"DELETE FROM {t('scope_versions')} WHERE scope_key = ? {agent_clause}", (plan.user_key, *agent_args),
        ).rowcount
        for agent, keys in plan.stamps.items():
            self.parts.leases.bump_stamps(conn, agent, keys)
        counts["leases"] = conn.execute(
            f"DELETE FROM {t('leases')} WHERE name IN ({_in(plan.leases)})", plan.leases,
        ).rowcount

    def _forget_messages(self, conn: sqlite3.Connection, user_id: str, agent_id: str | None, solo: list[str],
                         group: list[str]) -> dict[str, int]:
        """The user's messages and those of their one-to-one sessions go; the others' messages
        of a group session stay, without the user in their user list (rewritten)."""
        t = self.db.t
        agent_clause, agent_args = ("AND agent_id = ?", [agent_id]) if agent_id else ("", [])
        deleted = conn.execute(
            f"DELETE FROM {t('messages')} WHERE sender_id = ? {agent_clause}", (user_id, *agent_args)).rowcount
        deleted += conn.execute(f"DELETE FROM {t('messages')} WHERE session_id IN ({_in(solo)})", solo).rowcount
        rewritten = 0
        for rowid, doc in conn.execute(
            f"SELECT rowid, doc FROM {t('messages')} WHERE session_id IN ({_in(group)})", group,
        ).fetchall():
            message = StoredMessage.model_validate_json(doc)
            if user_id in message.session_users:
                message = message.model_copy(
                    update={"session_users": [u for u in message.session_users if u != user_id]})
                conn.execute(f"UPDATE {t('messages')} SET doc = ? WHERE rowid = ?", (message.model_dump_json(), rowid))
                rewritten += 1
        return {"messages_deleted": deleted, "messages_rewritten": rewritten}

    def _forget_in_sessions(self, conn: sqlite3.Connection, user_id: str, session_ids: list[str]) -> int:
        """The user's id out of the user lists of their sessions; how many changed."""
        touched = 0
        for sid in session_ids:
            row = conn.execute(f"SELECT doc FROM {self.db.t('sessions')} WHERE session_id = ?", (sid,)).fetchone()
            session = SessionState.model_validate_json(row[0]) if row else None
            if session is not None and user_id in session.users:
                self.parts.ingest.put_session_row(conn, session.model_copy(
                    update={"users": [u for u in session.users if u != user_id]}))
                touched += 1
        return touched

    def erase_memory(self, plan: Plan) -> None:
        t = self.db.t
        with self.db.write() as conn:
            for table, column, ids in (("facts", "fact_id", plan.fact_ids),
                                       ("reflections", "reflection_id", plan.reflection_ids)):
                for start in range(0, len(ids), 500):
                    chunk = ids[start:start + 500]
                    conn.execute(f"DELETE FROM {t(table)} WHERE {column} IN ({_in(chunk)})", chunk)
            conn.executemany(f"DELETE FROM {t('consolidated')} WHERE agent_id = ? AND scope_key = ?",
                             plan.drop_blobs)
            for agent, keys in plan.changed_keys().items():
                self.parts.leases.bump_stamps(conn, agent, keys)
                # a cached context of this agent may quote a removed item: stale, never served
                # again, but still a stored copy of what was erased
                conn.execute(f"DELETE FROM {t('contexts')} WHERE json_extract(doc, '$.agent_id') = ?", (agent,))

    def dump_all(self) -> dict[str, list[dict]]:
        conn = self.db.conn()
        out: dict[str, list[dict]] = {}
        for table in TABLES:
            cur = conn.execute(f"SELECT * FROM {self.db.t(table)}")
            names = [d[0] for d in cur.description]
            rows = []
            for row in cur.fetchall():
                record = dict(zip(names, row))
                if "doc" in record:
                    data = json.loads(record.pop("doc"))
                    if table == "facts":
                        data["embedding"] = vectors.from_bytes(record.get("embedding"))
                    rows.append(data)
                else:
                    rows.append(record)
            out[table] = rows
        return out
