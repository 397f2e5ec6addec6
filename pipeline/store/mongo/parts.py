"""What a Mongo repository is built on, and what it may reach of the others.

``MongoStore`` holds one repository per port (``facts``, ``runs``, ``ingest``, ...), each
built on the store (``MongoRepository(parts)``). A repository calls, besides its own methods,
only what ``MongoParts`` declares: the store's ``col(name)`` and the sibling repositories it
joins (``runs.require_run``, ``rollups.add_rollups`` ...). None of that is part of the port:
callers outside ``pipeline.store`` never use it.

Every subclass is wrapped when it is defined, so no repository can miss it: each port method
raises ``StoreUnavailable`` for a retryable driver error (``unavailable``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from pipeline.store._unavailable import translate_errors
from pipeline.store.mongo.unavailable import unavailable

if TYPE_CHECKING:  # the repositories import this module
    from pipeline.store.mongo.ingest import MongoIngest
    from pipeline.store.mongo.leases import MongoLeases
    from pipeline.store.mongo.provenance import MongoProvenance
    from pipeline.store.mongo.rollups import MongoRollups
    from pipeline.store.mongo.runs import MongoRuns
    from pipeline.store.mongo.stats import MongoStats

CAS_ATTEMPTS = 200      # compare-and-set retries under contention before giving up


class MongoParts(Protocol):
    """What a repository reaches through the store it belongs to."""

    ingest: MongoIngest
    runs: MongoRuns
    leases: MongoLeases
    provenance: MongoProvenance
    rollups: MongoRollups
    stats: MongoStats

    def col(self, name: str):
        """The store's collection ``name`` (with its prefix)."""
        ...


class MongoRepository:
    """One port's methods over the store's collections (``self.col(name)``)."""

    def __init__(self, parts: MongoParts) -> None:
        self.parts = parts

    def col(self, name: str):
        return self.parts.col(name)

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        translate_errors(unavailable)(cls)
