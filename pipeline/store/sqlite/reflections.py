"""SQLite store, reflections: buffered per scope key until a consolidation absorbs them.
A repository of ``SQLiteStore``; ``self.db`` is its ``Database``."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from pipeline.store import _common as c
from pipeline.store.ports.reflections import ReflectionStore
from pipeline.store.sqlite.db import Database, qmarks
from pipeline.store.sqlite.parts import SQLiteRepository
from schemas.documents import Reflection, ReflectionEdit


def counted(db: Database, agent_id: str, scope_keys: Sequence[str]) -> list[tuple[str, int, int, str]]:
    """Per scope key that has reflections: how many, how many are unabsorbed, and the newest
    one's ``formed_at``. Served by (agent_id, scope_key, absorbed, formed_at) from the index
    alone; the statistics port reads it too."""
    if not scope_keys:
        return []
    rows = db.conn().execute(
        f"SELECT scope_key, COUNT(*), SUM(absorbed = 0), MAX(formed_at) FROM {db.t('reflections')} "
        f"WHERE agent_id = ? AND scope_key IN ({qmarks(scope_keys)}) GROUP BY scope_key",
        (agent_id, *scope_keys),
    ).fetchall()
    return [(key, int(total), int(unabsorbed or 0), newest) for key, total, unabsorbed, newest in rows]


class SQLiteReflections(SQLiteRepository, ReflectionStore):

    def _put_reflection(self, conn: sqlite3.Connection, r: Reflection, verb: str = "INSERT OR REPLACE") -> int:
        cur = conn.execute(
            f"{verb} INTO {self.db.t('reflections')} (reflection_id, agent_id, scope_key, absorbed, formed_at, doc) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (r.reflection_id, r.agent_id, r.scope_key, int(r.absorbed), c.ts(r.formed_at), r.model_dump_json()),
        )
        return cur.rowcount

    def insert_reflections(self, reflections: Sequence[Reflection]) -> int:
        with self.db.write() as conn:
            return sum(self._put_reflection(conn, r, "INSERT OR IGNORE") for r in reflections)

    def unabsorbed_reflections(self, agent_id: str, scope_key: str, limit: int | None = None) -> list[Reflection]:
        rows = self.db.conn().execute(
            f"SELECT doc FROM {self.db.t('reflections')} WHERE agent_id = ? AND scope_key = ? AND absorbed = 0 "
            "ORDER BY formed_at, rowid LIMIT ?",
            (agent_id, scope_key, -1 if limit is None else limit),
        ).fetchall()
        return [Reflection.model_validate_json(doc) for (doc,) in rows]

    def count_unabsorbed(self, agent_id: str, scope_keys: Sequence[str]) -> dict[str, int]:
        counts = {key: 0 for key in scope_keys}
        counts.update({key: unabsorbed for key, _, unabsorbed, _ in counted(self.db, agent_id, scope_keys)})
        return counts

    def edit_reflection(self, reflection_id: str, content: str, now: datetime, by: str) -> Reflection | None:
        with self.db.write() as conn:
            row = conn.execute(f"SELECT doc FROM {self.db.t('reflections')} WHERE reflection_id = ?",
                               (reflection_id,)).fetchone()
            if row is None:
                return None
            r = Reflection.model_validate_json(row[0])
            if r.absorbed:
                return None
            edited = r.model_copy(update={"content": content, "history": [
                *r.history, ReflectionEdit(content=r.content, changed_at=c.utc(now), changed_by=by)]})
            self._put_reflection(conn, edited)
            return edited

    def mark_absorbed(self, reflection_ids: Sequence[str], blob_version: int, now: datetime) -> int:
        marked = 0
        with self.db.write() as conn:
            for rid in dict.fromkeys(reflection_ids):
                row = conn.execute(f"SELECT doc FROM {self.db.t('reflections')} WHERE reflection_id = ?",
                                   (rid,)).fetchone()
                if row is None:
                    continue
                r = Reflection.model_validate_json(row[0])
                if r.absorbed:
                    continue
                self._put_reflection(conn, r.model_copy(update={
                    "absorbed": True, "absorbed_at": c.utc(now), "consolidated_into": blob_version,
                }))
                marked += 1
        return marked

    def list_reflections(self, agent_id: str, scope_key: str, *, include_absorbed: bool = True) -> list[Reflection]:
        extra = "" if include_absorbed else " AND absorbed = 0"
        rows = self.db.conn().execute(
            f"SELECT doc FROM {self.db.t('reflections')} WHERE agent_id = ? AND scope_key = ?{extra} "
            "ORDER BY formed_at, rowid", (agent_id, scope_key),
        ).fetchall()
        return [Reflection.model_validate_json(doc) for (doc,) in rows]
