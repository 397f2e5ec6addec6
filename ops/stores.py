"""Which store a ``memoryctl`` command works on, said out loud, and never invented by a read.

A command that only reads (or repairs what is there) opens an existing store: a SQLite file
that is not there or holds none of this pipeline's tables (looked at read-only), or a MongoDB
database without this pipeline's collections, is an error
naming the path and how to create it, instead of a fresh empty store that answers "0 runs".
Only ``create-indexes``, ``agent set`` and ``migrate-v1 --apply`` create one.

Every command says on stderr which store it opened (the SQLite path made absolute, since the
default ``sqlite:///memory.db`` is relative to the current folder), so stdout stays the data.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sys
import urllib.parse

from pipeline.errors import ConfigurationError
from pipeline.store.port import Store
from schemas.settings import Settings

SQLITE_PREFIX = "sqlite:///"
HOW_TO_CREATE = "create it with memoryctl create-indexes, or set MEMORY_STORE_URL"


def sqlite_path(url: str) -> str | None:
    """The absolute file path of a ``sqlite:///`` URL; None for other stores and ``:memory:``."""
    if not url.startswith(SQLITE_PREFIX):
        return None
    path = url[len(SQLITE_PREFIX):]
    return None if path in ("", ":memory:") else os.path.abspath(path)


def describe(url: str) -> str:
    """The store for an operator: ``sqlite:////abs/path.db``, or the URL without its password."""
    path = sqlite_path(url)
    if path is not None:
        return SQLITE_PREFIX + path
    from kombu.utils.url import maybe_sanitize_url

    return maybe_sanitize_url(url)


def announce(label: str, url: str) -> None:
    print(f"{label}: {describe(url)}", file=sys.stderr)


def open_existing(settings: Settings) -> Store:
    """The store of ``MEMORY_STORE_URL``, which must already exist (read and repair commands)."""
    path = sqlite_path(settings.store_url)
    if path is not None and not os.path.isfile(path):
        raise ConfigurationError(f"no store at {path} ({HOW_TO_CREATE})")
    if path is not None and not _sqlite_has_tables(path, settings.collection_prefix):
        raise ConfigurationError(
            f"no store at {path}: the file holds no {settings.collection_prefix}* tables ({HOW_TO_CREATE})"
        )
    store = _open(settings)
    if path is None and _is_mongo(store) and not _has_collections(store, settings.collection_prefix):
        store.close()
        raise ConfigurationError(
            f"no store at {describe(settings.store_url)}: database {store.database.name!r} has no "
            f"{settings.collection_prefix}* collections ({HOW_TO_CREATE})"
        )
    return store


def open_or_create(settings: Settings) -> Store:
    """The store of ``MEMORY_STORE_URL``, created when missing (``create-indexes``, ``agent set``)."""
    return _open(settings)


def _open(settings: Settings) -> Store:
    from pipeline.store import open_store

    announce("store", settings.store_url)
    return open_store(settings)


def _is_mongo(store: Store) -> bool:
    from pipeline.store.mongo import MongoStore

    return isinstance(store, MongoStore)


def _sqlite_has_tables(path: str, prefix: str) -> bool:
    # read-only, so that looking changes nothing (opening the store creates its schema)
    uri = f"file:{urllib.parse.quote(path)}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
        names = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return any(name.startswith(prefix) for name in names)


def _has_collections(store, prefix: str) -> bool:
    # list_collection_names is the first round trip: an unreachable server fails here, and
    # ops.cli turns that into one line naming the host.
    return any(name.startswith(prefix) for name in store.database.list_collection_names())
