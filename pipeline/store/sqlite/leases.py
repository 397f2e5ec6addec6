"""SQLite store, named leases and scope version stamps. A repository of ``SQLiteStore``;
``self.db`` is its ``Database``. ``bump_stamps`` is also what a run's finish and an erasure
call inside their own transaction (``SQLiteParts``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from pipeline.store import _common as c
from pipeline.store.ports.leases import LeaseStore
from pipeline.store.sqlite.db import Database, qmarks
from pipeline.store.sqlite.parts import SQLiteRepository


class SQLiteLeases(SQLiteRepository, LeaseStore):

    def acquire_lease(self, name: str, holder: str, now: datetime, ttl_s: float) -> bool:
        table = self.db.t("leases")
        with self.db.write() as conn:
            row = conn.execute(f"SELECT holder, expires_at FROM {table} WHERE name = ?", (name,)).fetchone()
            if row and row[0] != holder and row[1] > c.ts(now):
                return False
            conn.execute(f"INSERT OR REPLACE INTO {table} (name, holder, expires_at) VALUES (?, ?, ?)",
                         (name, holder, c.ts(c.lease_until(now, ttl_s))))
            return True

    def release_lease(self, name: str, holder: str) -> None:
        with self.db.write() as conn:
            conn.execute(f"DELETE FROM {self.db.t('leases')} WHERE name = ? AND holder = ?", (name, holder))

    def bump_stamps(self, conn: sqlite3.Connection, agent_id: str, scope_keys: Sequence[str]) -> None:
        for key in dict.fromkeys(scope_keys):
            conn.execute(
                f"INSERT INTO {self.db.t('scope_versions')} (agent_id, scope_key, version) VALUES (?, ?, 1) "
                "ON CONFLICT (agent_id, scope_key) DO UPDATE SET version = version + 1",
                (agent_id, key),
            )

    def bump_scope_versions(self, agent_id: str, scope_keys: Sequence[str]) -> None:
        with self.db.write() as conn:
            self.bump_stamps(conn, agent_id, scope_keys)

    def stamps_epoch(self) -> int:
        return self.db.generation

    def get_scope_versions(self, agent_id: str, scope_keys: Sequence[str]) -> dict[str, int]:
        versions = {key: 0 for key in scope_keys}
        if scope_keys:
            rows = self.db.conn().execute(
                f"SELECT scope_key, version FROM {self.db.t('scope_versions')} WHERE agent_id = ? "
                f"AND scope_key IN ({qmarks(scope_keys)})", (agent_id, *scope_keys),
            ).fetchall()
            versions.update(dict(rows))
        return versions
