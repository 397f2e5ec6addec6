"""What an adapter's mixins call on each other: the inner interface of each store class.

An adapter is one class assembled from mixins (``sqlite.py`` with ``_sqlite_memory.py`` and
``_sqlite_erasure.py``; ``mongo.py`` with ``_mongo_runs.py``, ``_mongo_memory.py`` and
``_mongo_erasure.py``). A mixin calls, besides its own methods and the public port, only what
is declared here; the store class provides it, and an adapter missing one cannot be built.
Not part of the port: callers outside ``pipeline.store`` never use these.
"""

from __future__ import annotations

import abc
import sqlite3
from collections.abc import Sequence

from schemas.documents import FormationRun, SessionState


class SQLiteParts(abc.ABC):
    """Row writes inside a write transaction ``conn`` of the store's ``Database`` (``self.db``)."""

    @abc.abstractmethod
    def put_session_row(self, conn: sqlite3.Connection, session: SessionState) -> None:
        """Write the session's row (insert or replace)."""

    @abc.abstractmethod
    def put_run_row(self, conn: sqlite3.Connection, run: FormationRun) -> None:
        """Write the run's row (insert or replace)."""

    @abc.abstractmethod
    def release_claim(self, conn: sqlite3.Connection, run: FormationRun, watermark: bool) -> None:
        """Drop the session's claim if ``run`` holds it; with ``watermark``, advance the
        session's watermark to the run's ``seq_to``."""

    @abc.abstractmethod
    def bump_stamps(self, conn: sqlite3.Connection, agent_id: str, scope_keys: Sequence[str]) -> None:
        """Move the version stamps of these scope keys of the agent."""


class MongoParts(abc.ABC):
    """Lookups over the store's collections (``self.col(name)``)."""

    @abc.abstractmethod
    def require_run(self, run_id: str) -> FormationRun:
        """The stored run; ``KeyError`` when there is none."""

    @abc.abstractmethod
    def claim_holder(self, session: SessionState) -> FormationRun | None:
        """The run the session's claim names, while that run is active (claimed or running),
        else None."""
