"""The embedded store (design §7): one SQLite file, WAL mode, safe across threads and processes.

Every atomic method is one ``BEGIN IMMEDIATE`` transaction (see ``db``), so a
read-modify-write in Python is as atomic as a conditional update on a server. Documents are
kept as JSON with the queried columns beside them; embeddings as float32 bytes.

``SQLiteStore`` holds one repository per port as an attribute (``ingest``, ``runs``, ``facts``,
``reflections``, ``blobs``, ``leases``, ``contexts``, ``admin``, ``provenance``, ``access``,
``stats``, ``webhooks``, ``rollups``, ``caps``), all on one ``Database``; they reach each other
only through ``parts.SQLiteParts``.
"""

from __future__ import annotations

from pipeline.errors import ConfigurationError
from pipeline.store._unavailable import translate_errors
from pipeline.store.port import Store
from pipeline.store.sqlite.access import SQLiteAccess
from pipeline.store.sqlite.blobs import SQLiteBlobs
from pipeline.store.sqlite.caps import SQLiteCaps
from pipeline.store.sqlite.contexts import SQLiteContexts
from pipeline.store.sqlite.db import BUSY_TIMEOUT_S, Database, unavailable
from pipeline.store.sqlite.erasure import SQLiteErasure
from pipeline.store.sqlite.facts import SQLiteFacts
from pipeline.store.sqlite.ingest import SQLiteIngest
from pipeline.store.sqlite.leases import SQLiteLeases
from pipeline.store.sqlite.parts import SQLiteRepository
from pipeline.store.sqlite.pool import borrowing
from pipeline.store.sqlite.provenance import SQLiteProvenance
from pipeline.store.sqlite.reflections import SQLiteReflections
from pipeline.store.sqlite.rollups import SQLiteRollups
from pipeline.store.sqlite.runs import SQLiteRuns
from pipeline.store.sqlite.schema import create_schema
from pipeline.store.sqlite.stats import SQLiteStats
from pipeline.store.sqlite.webhooks import SQLiteWebhooks


@translate_errors(unavailable)
@borrowing
class SQLiteStore(Store):
    """The store's lifecycle; its methods are its repositories', each of which raises
    ``StoreUnavailable`` for a lock held past the busy timeout (``parts.SQLiteRepository``).
    A subclass may build one repository of its own (``REPOSITORIES``)."""

    REPOSITORIES: dict[str, type[SQLiteRepository]] = {
        "ingest": SQLiteIngest, "runs": SQLiteRuns, "facts": SQLiteFacts, "reflections": SQLiteReflections,
        "blobs": SQLiteBlobs, "leases": SQLiteLeases, "contexts": SQLiteContexts, "admin": SQLiteErasure,
        "provenance": SQLiteProvenance, "access": SQLiteAccess, "stats": SQLiteStats, "webhooks": SQLiteWebhooks,
        "rollups": SQLiteRollups, "caps": SQLiteCaps,
    }

    def __init__(self, path: str, prefix: str = "memory2_", *, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.db = Database(path, prefix, create_schema, busy_timeout_s=busy_timeout_s)
        for name, repository in self.REPOSITORIES.items():
            setattr(self, name, repository(self))

    @classmethod
    def from_url(cls, url: str, prefix: str = "memory2_", *, busy_timeout_s: float = BUSY_TIMEOUT_S) -> "SQLiteStore":
        """``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db`` or ``sqlite:///:memory:``."""
        if not url.startswith("sqlite:///") or len(url) <= len("sqlite:///"):
            raise ConfigurationError(f"store URL {url!r}: expected sqlite:///path/to/memory.db")
        return cls(url[len("sqlite:///"):], prefix=prefix, busy_timeout_s=busy_timeout_s)

    def create_indexes(self) -> list[str]:
        return self.db.create_schema()

    def close(self) -> None:
        self.db.close()
