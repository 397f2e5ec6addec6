"""The embedded SQLite store: ``SQLiteStore`` (``store``) composed of one repository per port."""

from __future__ import annotations

from pipeline.store.sqlite.store import SQLiteStore

__all__ = ["SQLiteStore"]
