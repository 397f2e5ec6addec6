"""SQLite store, facts: their effects (insert, update, retire), reads, search candidates and
re-embedding. A repository of ``SQLiteStore``; ``self.db`` is its ``Database``."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from datetime import datetime

from pydantic import TypeAdapter

from pipeline import vectors
from pipeline.store import _common as c
from pipeline.store.ports.facts import FactCandidate, FactStore, FactUpdate
from pipeline.store.sqlite.db import Database, qmarks
from pipeline.store.sqlite.labels import labelled_query
from pipeline.store.sqlite.parts import SQLiteRepository
from schemas.documents import Fact

_FACT_COLUMNS = "fact_id, doc, embedding"
_DATETIME = TypeAdapter(datetime)


def fact_from_row(doc: str, embedding: bytes | None) -> Fact:
    data = json.loads(doc)
    data["embedding"] = vectors.from_bytes(embedding)
    return Fact.model_validate(data)


class SQLiteFacts(SQLiteRepository, FactStore):

    def _fact_values(self, fact: Fact) -> tuple:
        return (
            fact.fact_id, fact.agent_id, fact.scope_key, fact.hash, fact.scope, fact.user_id,
            fact.content, vectors.to_bytes(fact.embedding), fact.embedding_model,
            c.ts(fact.formed_at), c.ts(fact.retired_at), fact.model_dump_json(exclude={"embedding"}),
            c.ts(fact.changed_at), fact.search_text, c.ts(fact.expires_at), json.dumps(fact.labels),
        )

    #: the columns ``_fact_values`` fills, in its order
    _fact_columns = ("fact_id, agent_id, scope_key, hash, scope, user_id, content, embedding, "
                     "embedding_model, formed_at, retired_at, doc, updated_at, search_text, expires_at, labels")

    def _put_fact(self, conn: sqlite3.Connection, fact: Fact, *, insert: bool) -> None:
        columns = self._fact_columns
        if insert:
            conn.execute(f"INSERT INTO {self.db.t('facts')} ({columns}) VALUES ({qmarks(columns.split(','))})",
                         self._fact_values(fact))
            return
        values = self._fact_values(fact)
        sets = ", ".join(f"{name.strip()} = ?" for name in columns.split(",")[1:])
        conn.execute(f"UPDATE {self.db.t('facts')} SET {sets} WHERE fact_id = ?", (*values[1:], values[0]))

    def _fact(self, conn: sqlite3.Connection, fact_id: str) -> Fact | None:
        row = conn.execute(f"SELECT doc, embedding FROM {self.db.t('facts')} WHERE fact_id = ?",
                           (fact_id,)).fetchone()
        return fact_from_row(*row) if row else None

    def insert_fact(self, fact: Fact) -> tuple[bool, str]:
        with self.db.write() as conn:
            row = conn.execute(
                f"SELECT fact_id FROM {self.db.t('facts')} WHERE agent_id = ? AND scope_key = ? AND hash = ? "
                "AND retired_at IS NULL", (fact.agent_id, fact.scope_key, fact.hash),
            ).fetchone()
            if row:
                return False, row[0]
            if self._fact(conn, fact.fact_id) is not None:
                return False, fact.fact_id
            self._put_fact(conn, fact, insert=True)
            return True, fact.fact_id

    def update_fact(self, fact_id: str, change: FactUpdate) -> bool:
        with self.db.write() as conn:
            fact = self._fact(conn, fact_id)
            if fact is None or fact.retired_at is not None:
                return False
            if any(entry.run_id == change.run_id for entry in fact.history):
                return False
            if change.expected_version is not None and fact.version != change.expected_version:
                return False
            clash = conn.execute(
                f"SELECT 1 FROM {self.db.t('facts')} WHERE agent_id = ? AND scope_key = ? AND hash = ? "
                "AND retired_at IS NULL AND fact_id != ?", (fact.agent_id, fact.scope_key, change.hash, fact_id),
            ).fetchone()
            if clash:
                return False
            entry, opened = c.closed_version(fact, change.now, change.valid_from, change.run_id)
            self._put_fact(conn, fact.model_copy(update={
                "content": change.content, "hash": change.hash, "embedding": change.embedding,
                "embedding_model": change.embedding_model, "version": fact.version + 1,
                "history": [*fact.history, entry], "updated_at": c.utc(change.now), "valid_from": opened,
                "source_message_ids": list(dict.fromkeys([*fact.source_message_ids, *change.source_message_ids])),
                "source_user_ids": list(dict.fromkeys([*fact.source_user_ids, *change.source_user_ids])),
                "source_text": change.source_text or fact.source_text,
                "expires_at": None if change.clear_expiry else c.utc(change.expires_at) if change.expires_at
                else fact.expires_at,
                "categories": fact.categories if change.categories is None else list(change.categories),
                "metadata": change.metadata_over(fact.metadata),
            }), insert=False)
            return True

    def retire_fact(
        self, fact_id: str, now: datetime, run_id: str, *, valid_to: datetime | None = None,
        expected_version: int | None = None, reason: str | None = None,
    ) -> bool:
        with self.db.write() as conn:
            fact = self._fact(conn, fact_id)
            if fact is None or fact.retired_at is not None:
                return False
            if expected_version is not None and fact.version != expected_version:
                return False
            self._put_fact(conn, fact.model_copy(update={
                "retired_at": c.utc(now), "retired_by": run_id, "valid_to": c.valid_until(fact, now, valid_to),
                "retired_reason": reason,
            }), insert=False)
            return True

    def expired_fact_ids(self, now: datetime, limit: int) -> list[str]:
        rows = self.db.conn().execute(  # the partial index facts_expiring holds exactly these
            f"SELECT fact_id FROM {self.db.t('facts')} WHERE retired_at IS NULL AND expires_at IS NOT NULL "
            "AND expires_at <= ? ORDER BY expires_at, fact_id LIMIT ?", (c.ts(now), limit),
        ).fetchall()
        return [row[0] for row in rows]

    def get_facts(self, fact_ids: Iterable[str]) -> list[Fact]:
        ids = list(dict.fromkeys(fact_ids))
        found: dict[str, Fact] = {}
        conn = self.db.conn()
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            for fact_id, doc, emb in conn.execute(
                f"SELECT {_FACT_COLUMNS} FROM {self.db.t('facts')} WHERE fact_id IN ({qmarks(chunk)})", chunk,
            ):
                found[fact_id] = fact_from_row(doc, emb)
        return [found[i] for i in ids if i in found]

    def find_fact_by_hash(self, agent_id: str, scope_key: str, hash: str) -> Fact | None:
        row = self.db.conn().execute(
            f"SELECT doc, embedding FROM {self.db.t('facts')} WHERE agent_id = ? AND scope_key = ? AND hash = ? "
            "AND retired_at IS NULL", (agent_id, scope_key, hash),
        ).fetchone()
        return fact_from_row(*row) if row else None

    def search_candidates(
        self, agent_id: str, scope_keys: Sequence[str], embedding_model: str | None
    ) -> list[FactCandidate]:
        if not scope_keys:
            return []
        rows = self.db.conn().execute(
            f"SELECT fact_id, scope, user_id, COALESCE(search_text, content), formed_at, embedding_model, embedding "
            f"FROM {self.db.t('facts')} WHERE agent_id = ? AND scope_key IN ({qmarks(scope_keys)}) "
            "AND retired_at IS NULL",
            (agent_id, *scope_keys),
        ).fetchall()
        parse = datetime.fromisoformat
        with c.no_gc():
            unpacked = vectors.views(
                [row[6] if embedding_model is not None and row[5] == embedding_model else None for row in rows])
            return [
                FactCandidate(fid, scope, user, content, vector, parse(formed))
                for (fid, scope, user, content, formed, _, _), vector in zip(rows, unpacked)
            ]

    def recent_facts(
        self, agent_id: str, scope_keys: Sequence[str], since: datetime, limit: int | None, *,
        include_retired: bool = False, having: Sequence[Sequence[str]] = (),
    ) -> list[Fact]:
        if not scope_keys:
            return []
        live = "" if include_retired and not having else "AND retired_at IS NULL "
        labelled, label_args = labelled_query(self.db.t, agent_id, scope_keys, having) if having else ("", [])
        only = f"AND fact_id IN ({labelled}) " if having else ""
        rows = self.db.conn().execute(
            f"SELECT doc, embedding FROM {self.db.t('facts')} WHERE agent_id = ? AND scope_key IN "
            f"({qmarks(scope_keys)}) {live}{only}AND updated_at >= ? "
            "ORDER BY updated_at DESC, rowid DESC LIMIT ?",
            (agent_id, *scope_keys, *label_args, c.ts(since), -1 if limit is None else limit),
        ).fetchall()
        return [fact_from_row(doc, emb) for doc, emb in rows]

    def labelled_fact_ids(
        self, agent_id: str, scope_keys: Sequence[str], having: Sequence[Sequence[str]],
    ) -> set[str]:
        if not scope_keys or not having or not all(having):
            return set()
        query, args = labelled_query(self.db.t, agent_id, scope_keys, having)
        return {row[0] for row in self.db.conn().execute(query, args)}

    def recent_fact_ids(
        self, agent_id: str, scope_key: str, embedding_model: str, since: datetime, limit: int
    ) -> list[str]:
        rows = self.db.conn().execute(
            f"SELECT fact_id FROM {self.db.t('facts')} WHERE agent_id = ? AND scope_key = ? "
            "AND embedding_model = ? AND retired_at IS NULL AND formed_at >= ? "
            "ORDER BY formed_at DESC, rowid DESC LIMIT ?",
            (agent_id, scope_key, embedding_model, c.ts(since), limit),
        ).fetchall()
        return [row[0] for row in rows]

    def record_fact_access(self, fact_ids: Sequence[str], now: datetime) -> None:
        # One statement on the stored document, like Mongo's ``$inc``: a search's hits cost
        # one short write on the read path, not a parse and a rewrite of each fact.
        ids = list(dict.fromkeys(fact_ids))
        if not ids:
            return
        stamp = _DATETIME.dump_python(c.utc(now), mode="json")
        with self.db.write() as conn:
            conn.execute(
                f"UPDATE {self.db.t('facts')} SET doc = json_set(doc, "
                "'$.access_count', COALESCE(json_extract(doc, '$.access_count'), 0) + 1, "
                f"'$.last_accessed_at', ?) WHERE fact_id IN ({qmarks(ids)})",
                (stamp, *ids),
            )

    def list_facts(
        self, agent_id: str, scope_key: str | None = None, *, include_retired: bool = False,
        limit: int | None = None, offset: int = 0,
    ) -> list[Fact]:
        where, args = ["agent_id = ?"], [agent_id]
        if scope_key is not None:
            where.append("scope_key = ?")
            args.append(scope_key)
        if not include_retired:
            where.append("retired_at IS NULL")
        rows = self.db.conn().execute(
            f"SELECT doc, embedding FROM {self.db.t('facts')} WHERE {' AND '.join(where)} "
            "ORDER BY formed_at DESC, rowid DESC LIMIT ? OFFSET ?",
            (*args, -1 if limit is None else limit, max(offset, 0)),
        ).fetchall()
        return [fact_from_row(doc, emb) for doc, emb in rows]

    def count_facts(self, agent_id: str, scope_key: str) -> int:
        return self.db.conn().execute(
            f"SELECT COUNT(*) FROM {self.db.t('facts')} WHERE agent_id = ? AND scope_key = ? AND retired_at IS NULL",
            (agent_id, scope_key),
        ).fetchone()[0]

    def memory_scope_keys(self, agent_id: str) -> list[str]:
        # each served by an index led by (agent_id, scope_key)
        rows = self.db.conn().execute(
            f"SELECT scope_key FROM {self.db.t('facts')} WHERE agent_id = ? AND retired_at IS NULL "
            f"UNION SELECT scope_key FROM {self.db.t('reflections')} WHERE agent_id = ? "
            f"UNION SELECT scope_key FROM {self.db.t('consolidated')} WHERE agent_id = ? ORDER BY 1",
            (agent_id, agent_id, agent_id),
        ).fetchall()
        return [key for (key,) in rows]

    def other_embedding_model(self, agent_id: str, model: str) -> str | None:
        # one range each side of ``model`` (NULL, no vector, is in neither): two seeks in the
        # partial index facts_agent_model_live, where "!=" or an OR would scan the agent's facts
        for side in ("<", ">"):
            row = self.db.conn().execute(
                f"SELECT embedding_model FROM {self.db.t('facts')} WHERE agent_id = ? AND retired_at IS NULL "
                f"AND embedding_model {side} ? LIMIT 1", (agent_id, model),
            ).fetchone()
            if row:
                return row[0]
        return None

    def iter_facts_for_reembed(self, agent_id: str | None, not_model: str, batch: int) -> Iterable[list[Fact]]:
        # Keyset pagination on fact_id, so facts re-embedded meanwhile do not shift the pages.
        after = ""
        while True:
            where = "retired_at IS NULL AND (embedding_model IS NULL OR embedding_model != ?) AND fact_id > ?"
            args: list[object] = [not_model, after]
            if agent_id is not None:
                where += " AND agent_id = ?"
                args.append(agent_id)
            rows = self.db.conn().execute(
                f"SELECT {_FACT_COLUMNS} FROM {self.db.t('facts')} WHERE {where} ORDER BY fact_id LIMIT ?",
                (*args, batch),
            ).fetchall()
            if not rows:
                return
            after = rows[-1][0]
            yield [fact_from_row(doc, emb) for _, doc, emb in rows]

    def set_fact_embedding(self, fact_id: str, embedding: list[float], model: str) -> None:
        with self.db.write() as conn:
            fact = self._fact(conn, fact_id)
            if fact is not None:
                self._put_fact(conn, fact.model_copy(update={"embedding": list(embedding), "embedding_model": model}),
                               insert=False)
