"""What a SQLite repository is built on, and what it may reach of the others.

``SQLiteStore`` holds one repository per port (``facts``, ``runs``, ``ingest``, ...), each
built on the store (``SQLiteRepository(parts)``). A repository calls, besides its own
methods, only what ``SQLiteParts`` declares: the store's ``Database`` and the sibling
repositories whose row writes it joins inside a transaction it opened (``session_row``,
``put_run_row``, ``bump_stamps`` ...). None of that is part of the port: callers outside
``pipeline.store`` never use it.

Every subclass is wrapped when it is defined, so no repository can miss it: each public
method borrows a pooled connection for its call (``pool.borrowing``) and raises
``StoreUnavailable`` for a lock held past the busy timeout (``db.unavailable``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from pipeline.store._unavailable import translate_errors
from pipeline.store.sqlite.db import Database, unavailable
from pipeline.store.sqlite.pool import borrowing

if TYPE_CHECKING:  # the repositories import this module
    from pipeline.store.sqlite.ingest import SQLiteIngest
    from pipeline.store.sqlite.leases import SQLiteLeases
    from pipeline.store.sqlite.provenance import SQLiteProvenance
    from pipeline.store.sqlite.runs import SQLiteRuns


class SQLiteParts(Protocol):
    """What a repository reaches through the store it belongs to."""

    db: Database
    ingest: SQLiteIngest
    runs: SQLiteRuns
    leases: SQLiteLeases
    provenance: SQLiteProvenance


class SQLiteRepository:
    """One port's methods over the store's ``Database`` (``self.db``)."""

    def __init__(self, parts: SQLiteParts) -> None:
        self.parts = parts

    @property
    def db(self) -> Database:
        return self.parts.db

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        translate_errors(unavailable)(borrowing(cls))
