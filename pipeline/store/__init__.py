"""The store port and the adapter chosen by ``MEMORY_STORE_URL``."""

from __future__ import annotations

from pipeline.errors import ConfigurationError
from pipeline.store.port import Store
from schemas.settings import Settings


def open_store(settings: Settings) -> Store:
    """``sqlite:///path`` (the embedded default) or ``mongodb://`` / ``mongodb+srv://``."""
    url = settings.store_url
    if url.startswith("sqlite:"):
        from pipeline.store.sqlite import SQLiteStore

        return SQLiteStore.from_url(url, prefix=settings.collection_prefix,
                                    busy_timeout_s=settings.sqlite_busy_timeout_s)
    if url.startswith(("mongodb://", "mongodb+srv://")):
        from pipeline.store.mongo import MongoStore

        return MongoStore.from_url(url, prefix=settings.collection_prefix)
    raise ConfigurationError(
        f"MEMORY_STORE_URL={url!r} is not supported: use sqlite:///path/to/memory.db or mongodb://host/db"
    )


__all__ = ["Store", "open_store"]
