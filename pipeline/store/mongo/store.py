"""The production store (design §7): MongoDB through pymongo, no transactions needed.

Atomicity comes from single-document conditional updates (``find_one_and_update`` with a
filter that states the precondition) and unique indexes (``DuplicateKeyError`` means "someone
else already did it"). Every query is plain MongoDB 7+/Atlas: no ``$where``, no JavaScript.

``MongoStore`` holds one repository per port as an attribute (``ingest``, ``runs``, ``facts``,
``reflections``, ``blobs``, ``leases``, ``contexts``, ``admin``, ``provenance``, ``access``,
``stats``, ``webhooks``, ``rollups``, ``caps``) on its collections; they reach each other only
through ``parts.MongoParts``.
"""

from __future__ import annotations

from pipeline.errors import ConfigurationError
from pipeline.store._unavailable import translate_errors
from pipeline.store.mongo.access import MongoAccess
from pipeline.store.mongo.blobs import MongoBlobs
from pipeline.store.mongo.caps import MongoCaps
from pipeline.store.mongo.contexts import MongoContexts
from pipeline.store.mongo.erasure import MongoErasure
from pipeline.store.mongo.facts import LABELS, LIVE, SEARCH_TEXT, MongoFacts
from pipeline.store.mongo.indexes import INDEXES, PARTIAL
from pipeline.store.mongo.ingest import MongoIngest
from pipeline.store.mongo.leases import MongoLeases
from pipeline.store.mongo.parts import MongoRepository
from pipeline.store.mongo.provenance import MongoProvenance
from pipeline.store.mongo.reflections import MongoReflections
from pipeline.store.mongo.rollups import MongoRollups
from pipeline.store.mongo.runs import MongoRuns
from pipeline.store.mongo.stats import MongoStats
from pipeline.store.mongo.unavailable import unavailable
from pipeline.store.mongo.webhooks import MongoWebhooks
from pipeline.store.port import Store

TIMEOUTS_MS = {"serverSelectionTimeoutMS": 10_000, "connectTimeoutMS": 10_000, "socketTimeoutMS": 30_000}


@translate_errors(unavailable)
class MongoStore(Store):
    """The store's lifecycle and its collections; its methods are its repositories', each of
    which raises ``StoreUnavailable`` for a retryable driver error (a failover, a lost
    connection: ``parts.MongoRepository``). A subclass may build one repository of its own
    (``REPOSITORIES``)."""

    REPOSITORIES: dict[str, type[MongoRepository]] = {
        "ingest": MongoIngest, "runs": MongoRuns, "facts": MongoFacts, "reflections": MongoReflections,
        "blobs": MongoBlobs, "leases": MongoLeases, "contexts": MongoContexts, "admin": MongoErasure,
        "provenance": MongoProvenance, "access": MongoAccess, "stats": MongoStats, "webhooks": MongoWebhooks,
        "rollups": MongoRollups, "caps": MongoCaps,
    }

    def __init__(self, database, prefix: str = "memory2_", *, client=None) -> None:
        self.database = database
        self.prefix = prefix
        self._client = client
        for name, repository in self.REPOSITORIES.items():
            setattr(self, name, repository(self))

    @classmethod
    def from_url(cls, url: str, prefix: str = "memory2_") -> "MongoStore":
        """``mongodb://host/db`` or ``mongodb+srv://...``; the database name comes from the URL
        (``memory`` when it names none)."""
        from pymongo import MongoClient
        from pymongo.errors import ConfigurationError as MongoConfigurationError
        from pymongo.errors import InvalidURI

        try:
            client = MongoClient(url, tz_aware=True, **TIMEOUTS_MS)
        except (InvalidURI, MongoConfigurationError, ValueError) as exc:
            raise ConfigurationError(f"MEMORY_STORE_URL is not a usable MongoDB URL: {exc}") from exc
        return cls(client.get_default_database("memory"), prefix=prefix, client=client)

    def col(self, name: str):
        return self.database[f"{self.prefix}{name}"]

    def create_indexes(self) -> list[str]:
        self._mark_live_facts()
        names = []
        for collection, keys, name, unique in INDEXES:
            options: dict = {"name": name, "unique": unique}
            partial = PARTIAL.get((collection, name))
            if partial is not None:
                options["partialFilterExpression"] = partial
                existing = self.col(collection).index_information().get(name)
                if existing is not None and existing.get("partialFilterExpression") != partial:
                    # Made before the key became partial: same name, other options, so rebuild it.
                    self.col(collection).drop_index(name)
            names.append(f"{self.prefix}{collection}.{self.col(collection).create_index(keys, **options)}")
        return names

    def _mark_live_facts(self) -> None:
        """Facts stored before the ``live`` flag existed get it, so the partial key holds them;
        facts stored before ``updated_at`` was always set get their ``formed_at`` there, so
        that ``recent_facts`` (<Facts>) finds them; facts stored before ``search_text`` get
        their content there, which the text search index reads; facts stored before ``labels``
        get their categories' labels (the only ones they could hold), which filters match."""
        facts = self.col("facts")
        facts.update_many({LIVE: {"$exists": False}, "retired_at": None}, {"$set": {LIVE: True}})
        facts.update_many({LIVE: {"$exists": False}}, {"$set": {LIVE: False}})
        facts.update_many({"updated_at": None}, [{"$set": {"updated_at": "$formed_at"}}])
        facts.update_many({SEARCH_TEXT: {"$exists": False}}, [{"$set": {SEARCH_TEXT: "$content"}}])
        facts.update_many({LABELS: {"$exists": False}}, [{"$set": {LABELS: {"$map": {
            "input": {"$ifNull": ["$categories", []]}, "in": {"$concat": ["category:", "$$this"]}}}}}])

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
