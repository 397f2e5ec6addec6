"""SQLite store, spend caps set at run time (the ``CapStore`` port): one row per owner."""

from __future__ import annotations

from datetime import datetime

from pipeline.store._common import ts
from pipeline.store.ports.caps import CapStore
from pipeline.store.sqlite.db import Database
from pipeline.store.sqlite.parts import SQLiteRepository
from schemas.caps import SpendCaps

TABLE = "spend_caps"
DDL = "owner TEXT PRIMARY KEY, updated_at TEXT NOT NULL, doc TEXT NOT NULL"


class SQLiteCaps(SQLiteRepository, CapStore):

    def put_spend_caps(self, owner: str, caps: SpendCaps | None, now: datetime) -> None:
        with self.db.write() as conn:
            if caps is None:
                conn.execute(f"DELETE FROM {self.db.t(TABLE)} WHERE owner = ?", (owner,))
                return
            conn.execute(f"INSERT OR REPLACE INTO {self.db.t(TABLE)} (owner, updated_at, doc) VALUES (?, ?, ?)",
                         (owner, ts(now), caps.model_dump_json()))

    def get_spend_caps(self, owner: str) -> SpendCaps | None:
        row = self.db.conn().execute(f"SELECT doc FROM {self.db.t(TABLE)} WHERE owner = ?", (owner,)).fetchone()
        return SpendCaps.model_validate_json(row[0]) if row else None

    def list_spend_caps(self) -> dict[str, SpendCaps]:
        rows = self.db.conn().execute(f"SELECT owner, doc FROM {self.db.t(TABLE)} ORDER BY owner").fetchall()
        return {owner: SpendCaps.model_validate_json(doc) for owner, doc in rows}
