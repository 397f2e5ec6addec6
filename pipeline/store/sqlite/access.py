"""SQLite store, access control: API keys, audit log, jobs, user memory switches (the
``AccessStore`` port). A repository of ``SQLiteStore``; ``self.db`` is its ``Database``."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from pipeline.store._common import ts
from pipeline.store.ports.access import AccessStore
from pipeline.store.sqlite.db import IN_CHUNK, Database
from pipeline.store.sqlite.parts import SQLiteRepository
from schemas.access import ApiKey, AuditEntry, Job

class SQLiteAccess(SQLiteRepository, AccessStore):

    # ------------------------------------------------------------------ keys ---------------
    def put_api_key(self, key: ApiKey) -> None:
        try:
            with self.db.write() as conn:
                conn.execute(f"INSERT INTO {self.db.t('api_keys')} (key_id, digest, doc) VALUES (?, ?, ?)",
                             (key.key_id, key.digest, key.model_dump_json()))
        except sqlite3.IntegrityError as exc:
            raise ValueError(f"a key with id {key.key_id} or the same secret exists") from exc

    def find_api_key(self, digest: str) -> ApiKey | None:
        row = self.db.conn().execute(f"SELECT doc FROM {self.db.t('api_keys')} WHERE digest = ?", (digest,)).fetchone()
        return ApiKey.model_validate_json(row[0]) if row else None

    def list_api_keys(self) -> list[ApiKey]:
        rows = self.db.conn().execute(f"SELECT doc FROM {self.db.t('api_keys')}").fetchall()
        return sorted((ApiKey.model_validate_json(r[0]) for r in rows), key=lambda k: (k.created_at, k.key_id))

    def revoke_api_key(self, key_id: str, now: datetime) -> ApiKey | None:
        with self.db.write() as conn:
            row = conn.execute(f"SELECT doc FROM {self.db.t('api_keys')} WHERE key_id = ?", (key_id,)).fetchone()
            if row is None:
                return None
            key = ApiKey.model_validate_json(row[0])
            if key.revoked_at is None:
                key = key.model_copy(update={"revoked_at": now})
                conn.execute(f"UPDATE {self.db.t('api_keys')} SET doc = ? WHERE key_id = ?", (key.model_dump_json(), key_id))
            return key

    # ------------------------------------------------------------------ audit --------------
    def record_audit(self, entry: AuditEntry) -> None:
        with self.db.write() as conn:
            conn.execute(f"INSERT OR REPLACE INTO {self.db.t('audit')} (audit_id, at, action, doc) VALUES (?, ?, ?, ?)",
                         (entry.audit_id, ts(entry.at), entry.action, entry.model_dump_json()))

    def list_audit(self, *, since: datetime | None = None, action: str | None = None,
                   limit: int = 100) -> list[AuditEntry]:
        where, args = [], []
        if since is not None:
            where.append("at >= ?")
            args.append(ts(since))
        if action is not None:
            where.append("action = ?")
            args.append(action)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = self.db.conn().execute(
            f"SELECT doc FROM {self.db.t('audit')} {clause} ORDER BY at DESC, audit_id DESC LIMIT ?", (*args, limit),
        ).fetchall()
        return [AuditEntry.model_validate_json(r[0]) for r in rows]

    # ------------------------------------------------------------------ jobs ---------------
    def put_job(self, job: Job) -> None:
        with self.db.write() as conn:
            conn.execute(f"INSERT OR REPLACE INTO {self.db.t('jobs')} (job_id, doc) VALUES (?, ?)",
                         (job.job_id, job.model_dump_json()))

    def get_job(self, job_id: str) -> Job | None:
        row = self.db.conn().execute(f"SELECT doc FROM {self.db.t('jobs')} WHERE job_id = ?", (job_id,)).fetchone()
        return Job.model_validate_json(row[0]) if row else None

    # ------------------------------------------------------------------ user switch --------
    def set_user_memory(self, agent_id: str, user_id: str, enabled: bool, now: datetime) -> None:
        with self.db.write() as conn:
            conn.execute(
                f"INSERT OR REPLACE INTO {self.db.t('user_switches')} (agent_id, user_id, enabled, updated_at) "
                "VALUES (?, ?, ?, ?)", (agent_id, user_id, int(enabled), ts(now)),
            )

    def user_memory_off(self, agent_id: str, user_ids: Sequence[str]) -> set[str]:
        ids = list(dict.fromkeys(u for u in user_ids if u))
        off: set[str] = set()
        conn = self.db.conn()
        for i in range(0, len(ids), IN_CHUNK):
            chunk = ids[i:i + IN_CHUNK]
            rows = conn.execute(
                f"SELECT user_id FROM {self.db.t('user_switches')} WHERE agent_id = ? AND enabled = 0 "
                f"AND user_id IN ({', '.join('?' * len(chunk))})", (agent_id, *chunk),
            ).fetchall()
            off.update(r[0] for r in rows)
        return off

    def forget_user_switches(self, user_id: str, agent_id: str | None = None, *, dry_run: bool = False) -> int:
        where, args = ("user_id = ?", (user_id,)) if agent_id is None else ("user_id = ? AND agent_id = ?", (user_id, agent_id))
        if dry_run:
            return self.db.conn().execute(f"SELECT COUNT(*) FROM {self.db.t('user_switches')} WHERE {where}", args).fetchone()[0]
        with self.db.write() as conn:
            return conn.execute(f"DELETE FROM {self.db.t('user_switches')} WHERE {where}", args).rowcount
