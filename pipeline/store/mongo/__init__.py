"""The production MongoDB store: ``MongoStore`` (``store``) composed of one repository per port."""

from __future__ import annotations

from pipeline.store.mongo.indexes import INDEXES, PARTIAL
from pipeline.store.mongo.store import TIMEOUTS_MS, MongoStore

__all__ = ["INDEXES", "PARTIAL", "TIMEOUTS_MS", "MongoStore"]
