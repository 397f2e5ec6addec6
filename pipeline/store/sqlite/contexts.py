"""SQLite store, the context cache: one assembled context per (session, user). A repository
of ``SQLiteStore``; ``self.db`` is its ``Database``."""

from __future__ import annotations

from pipeline.store.ports.contexts import ContextStore
from pipeline.store.sqlite.db import Database
from pipeline.store.sqlite.parts import SQLiteRepository
from schemas.documents import CachedContext


class SQLiteContexts(SQLiteRepository, ContextStore):

    def get_cached_context(self, session_id: str, user_id: str) -> CachedContext | None:
        row = self.db.conn().execute(
            f"SELECT doc FROM {self.db.t('contexts')} WHERE session_id = ? AND user_id = ?", (session_id, user_id),
        ).fetchone()
        return CachedContext.model_validate_json(row[0]) if row else None

    def put_cached_context(self, cached: CachedContext) -> None:
        with self.db.write() as conn:
            conn.execute(
                f"INSERT OR REPLACE INTO {self.db.t('contexts')} (session_id, user_id, doc) VALUES (?, ?, ?)",
                (cached.session_id, cached.user_id, cached.model_dump_json()),
            )
