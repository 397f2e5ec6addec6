"""SQLite store, webhooks: subscriptions and deliveries (the ``WebhookStore`` port). A
repository of ``SQLiteStore``; ``self.db`` is its ``Database``. The people a delivery is about
are also rows of ``webhook_subjects``, so an erasure finds their deliveries by index."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pipeline.store._common import ts
from pipeline.store.ports.webhooks import WebhookStore
from pipeline.store.sqlite.db import Database, chunks
from pipeline.store.sqlite.parts import SQLiteRepository
from schemas.webhooks import DeliveryStatus, WebhookDelivery, WebhookSubscription


class SQLiteWebhooks(SQLiteRepository, WebhookStore):

    def put_subscription(self, sub: WebhookSubscription) -> None:
        with self.db.write() as conn:
            conn.execute(f"INSERT OR REPLACE INTO {self.db.t('webhook_subscriptions')} "
                         f"(subscription_id, agent_id, created_at, doc) VALUES (?, ?, ?, ?)",
                         (sub.subscription_id, sub.agent_id, ts(sub.created_at), sub.model_dump_json()))

    def get_subscription(self, subscription_id: str) -> WebhookSubscription | None:
        row = self.db.conn().execute(f"SELECT doc FROM {self.db.t('webhook_subscriptions')} WHERE subscription_id = ?",
                                     (subscription_id,)).fetchone()
        return WebhookSubscription.model_validate_json(row[0]) if row else None

    def list_subscriptions(self, agent_id: str | None = None) -> list[WebhookSubscription]:
        clause, args = ("WHERE agent_id = ?", (agent_id,)) if agent_id is not None else ("", ())
        rows = self.db.conn().execute(f"SELECT doc FROM {self.db.t('webhook_subscriptions')} {clause} "
                                      f"ORDER BY created_at, subscription_id", args).fetchall()
        return [WebhookSubscription.model_validate_json(r[0]) for r in rows]

    def delete_subscription(self, subscription_id: str) -> int:
        with self.db.write() as conn:
            ids = [r[0] for r in conn.execute(f"SELECT delivery_id FROM {self.db.t('webhook_deliveries')} "
                                              f"WHERE subscription_id = ?", (subscription_id,)).fetchall()]
            self._delete_deliveries(conn, ids)
            gone = conn.execute(f"DELETE FROM {self.db.t('webhook_subscriptions')} WHERE subscription_id = ?",
                                (subscription_id,)).rowcount
        return gone + len(ids) if gone else 0

    def add_deliveries(self, deliveries: Sequence[WebhookDelivery]) -> int:
        added = 0
        with self.db.write() as conn:
            for d in deliveries:
                added += conn.execute(
                    f"INSERT OR IGNORE INTO {self.db.t('webhook_deliveries')} (delivery_id, subscription_id, agent_id, "
                    f"status, next_at, created_at, doc) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (d.delivery_id, d.subscription_id, d.agent_id, d.status, ts(d.next_attempt_at), ts(d.created_at),
                     d.model_dump_json())).rowcount
                conn.executemany(f"INSERT OR IGNORE INTO {self.db.t('webhook_subjects')} (user_id, delivery_id) "
                                 f"VALUES (?, ?)", [(u, d.delivery_id) for u in d.event.subjects])
        return added

    def get_delivery(self, delivery_id: str) -> WebhookDelivery | None:
        row = self.db.conn().execute(f"SELECT doc FROM {self.db.t('webhook_deliveries')} WHERE delivery_id = ?",
                                     (delivery_id,)).fetchone()
        return WebhookDelivery.model_validate_json(row[0]) if row else None

    def list_deliveries(self, *, agent_id: str | None = None, subscription_id: str | None = None,
                        status: DeliveryStatus | None = None, limit: int = 100) -> list[WebhookDelivery]:
        where = [(c, v) for c, v in (("agent_id", agent_id), ("subscription_id", subscription_id),
                                     ("status", status)) if v is not None]
        clause = ("WHERE " + " AND ".join(f"{c} = ?" for c, _ in where)) if where else ""
        rows = self.db.conn().execute(
            f"SELECT doc FROM {self.db.t('webhook_deliveries')} {clause} ORDER BY created_at DESC, delivery_id DESC "
            f"LIMIT ?", (*(v for _, v in where), limit)).fetchall()
        return [WebhookDelivery.model_validate_json(r[0]) for r in rows]

    def due_deliveries(self, now: datetime, limit: int = 100) -> list[str]:
        rows = self.db.conn().execute(
            f"SELECT delivery_id FROM {self.db.t('webhook_deliveries')} WHERE status = 'pending' AND next_at <= ? "
            f"ORDER BY next_at, delivery_id LIMIT ?", (ts(now), limit)).fetchall()
        return [r[0] for r in rows]

    def claim_delivery(self, delivery_id: str, now: datetime, until: datetime) -> WebhookDelivery | None:
        with self.db.write() as conn:
            row = conn.execute(f"SELECT doc FROM {self.db.t('webhook_deliveries')} WHERE delivery_id = ? "
                               f"AND status = 'pending' AND next_at <= ?", (delivery_id, ts(now))).fetchone()
            if row is None:
                return None
            claimed = WebhookDelivery.model_validate_json(row[0]).model_copy(update={"next_attempt_at": until})
            self._write(conn, claimed)
            return claimed

    def save_delivery(self, delivery: WebhookDelivery) -> bool:
        with self.db.write() as conn:
            return self._write(conn, delivery)

    def forget_deliveries(self, user_id: str, agent_id: str | None = None, *, dry_run: bool = False) -> int:
        if dry_run:
            return len(self._about(self.db.conn(), user_id, agent_id))
        with self.db.write() as conn:
            return self._delete_deliveries(conn, self._about(conn, user_id, agent_id))

    def _about(self, conn, user_id: str, agent_id: str | None) -> list[str]:
        return [r[0] for r in conn.execute(
            f"SELECT s.delivery_id FROM {self.db.t('webhook_subjects')} s JOIN {self.db.t('webhook_deliveries')} d "
            f"ON d.delivery_id = s.delivery_id WHERE s.user_id = ?" + (" AND d.agent_id = ?" if agent_id else ""),
            (user_id, agent_id) if agent_id else (user_id,)).fetchall()]

    def _write(self, conn, d: WebhookDelivery) -> bool:
        return conn.execute(f"UPDATE {self.db.t('webhook_deliveries')} SET status = ?, next_at = ?, doc = ? "
                            f"WHERE delivery_id = ?",
                            (d.status, ts(d.next_attempt_at), d.model_dump_json(), d.delivery_id)).rowcount == 1

    def _delete_deliveries(self, conn, ids: Sequence[str]) -> int:
        gone = 0
        for chunk in chunks(ids):
            marks = ",".join("?" * len(chunk))
            gone += conn.execute(f"DELETE FROM {self.db.t('webhook_deliveries')} WHERE delivery_id IN ({marks})",
                                 chunk).rowcount
            conn.execute(f"DELETE FROM {self.db.t('webhook_subjects')} WHERE delivery_id IN ({marks})", chunk)
        return gone
