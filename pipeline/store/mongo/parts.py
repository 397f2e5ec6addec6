"""What the Mongo repositories call on each other: the inner interface of ``MongoStore``.

The store is one class composed of repositories, one per port (``facts``, ``runs``,
``ingest``, ...). A repository calls, besides its own methods and the public port, only what
is declared here and the store's ``col(name)``; the store class provides them, and a store
missing one cannot be built. Not part of the port: callers outside ``pipeline.store`` never
use these.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence

from pipeline.store.ports.rollups import Increment
from schemas.documents import FormationRun, SessionState, UsageRecord

CAS_ATTEMPTS = 200      # compare-and-set retries under contention before giving up


class MongoParts(abc.ABC):
    """Lookups over the store's collections (``self.col(name)``)."""

    @abc.abstractmethod
    def require_run(self, run_id: str) -> FormationRun:
        """The stored run; ``KeyError`` when there is none."""

    @abc.abstractmethod
    def claim_holder(self, session: SessionState) -> FormationRun | None:
        """The run the session's claim names, while that run is active (claimed or running),
        else None."""

    @abc.abstractmethod
    def count_uncounted(self, session_id: str) -> bool:
        """Count the message stored with seq ``last_seq + 1`` whose ingest stopped before
        counting it (``ingest``); True if there was one. A claim calls it so that the message
        joins its range."""

    @abc.abstractmethod
    def add_rollups(self, found: Sequence[Increment]) -> None:
        """Add usage increments to their roll-up rows (``rollups``)."""

    @abc.abstractmethod
    def record_rollups(self, record: UsageRecord) -> list[Increment]:
        """What a usage record adds to the roll-ups (``rollups``)."""

    @abc.abstractmethod
    def keep_usage_record(self, record: UsageRecord) -> bool:
        """Store a usage record without rolling it up (``stats``); True when it is new."""

    @abc.abstractmethod
    def col(self, name: str):
        """The store's collection ``name`` (with its prefix)."""
