"""What the SQLite repositories call on each other: the inner interface of ``SQLiteStore``.

The store is one class composed of repositories, one per port (``facts``, ``runs``,
``ingest``, ...). A repository calls, besides its own methods and the public port, only what
is declared here (row writes inside a transaction another repository opened); the store class
provides it, and a store missing one cannot be built. Not part of the port: callers outside
``pipeline.store`` never use these.
"""

from __future__ import annotations

import abc
import sqlite3
from collections.abc import Sequence

from schemas.documents import FormationRun, SessionState


class SQLiteParts(abc.ABC):
    """Row writes inside a write transaction ``conn`` of the store's ``Database`` (``self.db``)."""

    @abc.abstractmethod
    def session_row(self, conn: sqlite3.Connection, session_id: str) -> SessionState | None:
        """The stored session, read inside ``conn``'s transaction."""

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
