"""SQLite store, erasure and audit: ``forget_user`` and ``dump_all``. Mixed into ``SQLiteStore``."""

from __future__ import annotations

import json
import sqlite3

from pipeline.erasure import Plan
from pipeline.store import _common as c
from pipeline.store._sqlite_db import TABLES
from pipeline.user_ids import lease_names_user, raw_names_user
from schemas.documents import FormationRun, RejectedEvent, SessionState, StoredMessage, scope_key


def _in(values: list[str]) -> str:
    return ", ".join("?" for _ in values) or "NULL"


class ErasureMixin:
    db: "object"

    def _user_sessions(self, conn: sqlite3.Connection, user_id: str, agent_id: str | None) -> dict[str, str]:
        """session id -> agent id of every session the user was in."""
        agent_clause, args = ("AND agent_id = ?", [agent_id]) if agent_id else ("", [])
        rows = conn.execute(
            f"SELECT session_id, agent_id FROM {self.db.t('sessions')} WHERE EXISTS "
            f"(SELECT 1 FROM json_each(doc, '$.users') WHERE value = ?) {agent_clause} "
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

    def forget_user(self, user_id: str, agent_id: str | None = None) -> dict[str, int]:
        t = self.db.t
        user_key = scope_key("user", user_id=user_id)
        counts: dict[str, int] = {}
        with self.db.write() as conn:
            sessions = self._user_sessions(conn, user_id, agent_id)
            sids = list(sessions)
            # One-to-one sessions go whole; group sessions keep what the others said and formed.
            solo = {sid: agent for sid, agent in sessions.items() if c.sole_human(user_id, self._humans(conn, sid))}
            group = [sid for sid in sids if sid not in solo]
            agent_clause, agent_args = ("AND agent_id = ?", [agent_id]) if agent_id else ("", [])

            counts["facts"] = conn.execute(
                f"DELETE FROM {t('facts')} WHERE scope_key = ? {agent_clause}", (user_key, *agent_args),
            ).rowcount
            for table in ("reflections", "consolidated"):
                counts[table] = conn.execute(
                    f"DELETE FROM {t(table)} WHERE scope_key = ? {agent_clause}", (user_key, *agent_args),
                ).rowcount
                for sid, agent in solo.items():
                    counts[table] += conn.execute(
                        f"DELETE FROM {t(table)} WHERE scope_key = ? AND agent_id = ?",
                        (scope_key("session", session_id=sid), agent),
                    ).rowcount

            removed = conn.execute(
                f"DELETE FROM {t('messages')} WHERE sender_id = ? {agent_clause}", (user_id, *agent_args),
            ).rowcount
            removed += conn.execute(
                f"DELETE FROM {t('messages')} WHERE session_id IN ({_in(list(solo))})", list(solo),
            ).rowcount
            for rowid, doc in conn.execute(
                f"SELECT rowid, doc FROM {t('messages')} WHERE session_id IN ({_in(group)})", group,
            ).fetchall():
                message = StoredMessage.model_validate_json(doc)
                if user_id in message.session_users:
                    message = message.model_copy(
                        update={"session_users": [u for u in message.session_users if u != user_id]})
                    conn.execute(f"UPDATE {t('messages')} SET doc = ? WHERE rowid = ?",
                                 (message.model_dump_json(), rowid))
                    removed += 1
            counts["messages"] = removed

            # Runs that name the user quote them: finished ones go, and so does every run of a
            # one-to-one session; an unfinished run of a group session is emptied and failed,
            # so its range is formed again for the others.
            runs = 0
            for run_id, doc in conn.execute(f"SELECT run_id, doc FROM {t('runs')}").fetchall():
                run = FormationRun.model_validate_json(doc)
                if agent_id is not None and run.agent_id != agent_id:
                    continue
                in_flight = run.status in c.ACTIVE_RUN_STATUSES
                if (run.session_id in solo and not in_flight) or (user_id in run.user_ids and run.status == "done"):
                    conn.execute(f"DELETE FROM {t('runs')} WHERE run_id = ?", (run_id,))
                elif user_id in run.user_ids or run.session_id in solo:
                    self._release(conn, run, watermark=False)
                    self._put_run(conn, c.forgotten_from_run(run, user_id, solo=run.session_id in solo))
                else:
                    continue
                runs += 1
            counts["runs"] = runs

            rejected = 0
            for rid, doc in conn.execute(f"SELECT rejection_id, doc FROM {t('rejected')}").fetchall():
                event = RejectedEvent.model_validate_json(doc)
                if agent_id is not None and event.agent_id not in (None, agent_id):
                    continue
                if raw_names_user(event.raw, user_id):
                    conn.execute(f"DELETE FROM {t('rejected')} WHERE rejection_id = ?", (rid,))
                    rejected += 1
            counts["rejected"] = rejected

            context_agent = ""
            if agent_id:
                context_agent = " AND json_extract(doc, '$.agent_id') = ?"
            counts["contexts"] = conn.execute(
                f"DELETE FROM {t('contexts')} WHERE (user_id = ?{context_agent}) OR session_id IN ({_in(sids)})",
                (user_id, *agent_args, *sids),
            ).rowcount

            touched = 0
            for sid in sids:
                row = conn.execute(f"SELECT doc FROM {t('sessions')} WHERE session_id = ?", (sid,)).fetchone()
                if row is None:
                    continue
                session = SessionState.model_validate_json(row[0])
                if user_id in session.users:
                    self._put_session(conn, session.model_copy(
                        update={"users": [u for u in session.users if u != user_id]}))
                    touched += 1
            counts["sessions"] = touched

            # The stamp of the user's scope names the user: drop it, and move the agent and
            # session stamps instead so that every cache built over the erased data is stale.
            agents = {agent_id} if agent_id else {
                a for (a,) in conn.execute(
                    f"SELECT agent_id FROM {t('scope_versions')} WHERE scope_key = ?", (user_key,)).fetchall()
            } | set(sessions.values())
            counts["scope_versions"] = conn.execute(
                f"DELETE FROM {t('scope_versions')} WHERE scope_key = ? {agent_clause}", (user_key, *agent_args),
            ).rowcount
            for agent in agents:
                keys = ["agent"] + [scope_key("session", session_id=s) for s, a in sessions.items() if a == agent]
                self._bump(conn, agent, keys)
            leases = [name for (name,) in conn.execute(f"SELECT name FROM {t('leases')}").fetchall()
                      if lease_names_user(name, user_id) and (not agent_id or name.startswith(f"consolidate:{agent_id}:"))]
            counts["leases"] = conn.execute(
                f"DELETE FROM {t('leases')} WHERE name IN ({_in(leases)})", leases,
            ).rowcount
        return counts

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
                self._bump(conn, agent, keys)

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
                        data["embedding"] = c.embedding_list(record.get("embedding"))
                    rows.append(data)
                else:
                    rows.append(record)
            out[table] = rows
        return out
