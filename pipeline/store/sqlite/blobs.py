"""SQLite store, consolidated blobs: one per (agent, scope key), written by compare-and-set.
A repository of ``SQLiteStore``; ``self.db`` is its ``Database``."""

from __future__ import annotations

from pipeline.store.ports.blobs import BlobStore
from pipeline.store.sqlite.db import Database
from pipeline.store.sqlite.parts import SQLiteRepository
from schemas.documents import ConsolidatedBlob


class SQLiteBlobs(SQLiteRepository, BlobStore):

    def get_blob(self, agent_id: str, scope_key: str) -> ConsolidatedBlob | None:
        row = self.db.conn().execute(
            f"SELECT doc FROM {self.db.t('consolidated')} WHERE agent_id = ? AND scope_key = ?", (agent_id, scope_key),
        ).fetchone()
        return ConsolidatedBlob.model_validate_json(row[0]) if row else None

    def save_blob(self, blob: ConsolidatedBlob, expected_version: int) -> bool:
        table = self.db.t("consolidated")
        with self.db.write() as conn:
            row = conn.execute(f"SELECT version FROM {table} WHERE agent_id = ? AND scope_key = ?",
                               (blob.agent_id, blob.scope_key)).fetchone()
            if (row[0] if row else 0) != expected_version:
                return False
            conn.execute(f"INSERT OR REPLACE INTO {table} (agent_id, scope_key, version, doc) VALUES (?, ?, ?, ?)",
                         (blob.agent_id, blob.scope_key, blob.version, blob.model_dump_json()))
            return True
