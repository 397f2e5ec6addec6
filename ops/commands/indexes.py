"""``memoryctl create-indexes``: every index of the store, idempotently (design §7).

On MongoDB with ``MEMORY_ATLAS_SEARCH`` on, the Atlas Search and Vector Search indexes are
created too, or updated when their definition changed (never otherwise: each update makes
Atlas rebuild the index), and the command waits up to ``--wait`` seconds
(``MEMORY_ATLAS_INDEX_WAIT_S``) for them to be READY, with a progress line on stderr per poll.
Running it again changes nothing and reports the search indexes "unchanged".
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys

from pipeline.errors import ConfigurationError
from schemas.settings import get_settings


def open_store(settings):
    from ops.stores import open_or_create

    return open_or_create(settings)


def _search_indexes(store, settings, wait_s: float | None) -> list[str]:
    try:
        atlas = importlib.import_module("pipeline.search.atlas_indexes")
    except ImportError as exc:
        raise ConfigurationError(
            "MEMORY_ATLAS_SEARCH is on, but this installation has no Atlas search support "
            f"(pipeline.search.atlas_indexes cannot be imported: {exc}); the regular indexes were created"
        ) from exc
    outcomes = atlas.create_search_indexes(store, settings, wait_s=wait_s, progress=_progress)
    return [o.describe() if hasattr(o, "describe") else str(o) for o in (outcomes or [])]


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _create(args: argparse.Namespace) -> int:
    from pipeline.store.mongo import MongoStore

    settings = get_settings()
    store = open_store(settings)
    try:
        kind = "mongo" if isinstance(store, MongoStore) else "sqlite"
        names = store.create_indexes()
        search: list[str] | None = None
        note = None
        if settings.atlas_search and kind == "mongo":
            try:
                search = _search_indexes(store, settings, args.wait)
            except ConfigurationError:
                _report(args, kind, names, None, None)
                raise
        elif settings.atlas_search:
            note = "MEMORY_ATLAS_SEARCH is on but the store is SQLite: no search indexes to create"
    finally:
        store.close()
    _report(args, kind, names, search, note)
    return 0


def _report(args, kind: str, names: list[str], search: list[str] | None, note: str | None) -> None:
    if args.json:
        print(json.dumps({"store": kind, "indexes": names, "search_indexes": search, "note": note}, sort_keys=True))
        return
    print(f"{len(names)} indexes on the {kind} store:")
    for name in names:
        print(f"  {name}")
    if search is not None:
        print(f"{len(search)} Atlas search indexes:")
        for name in search:
            print(f"  {name}")
    if note:
        print(note, file=sys.stderr)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "create-indexes", help="create every store index (and Atlas search indexes when enabled), idempotently",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--wait", type=float, default=None, metavar="SECONDS",
        help="how long to wait for new or changed Atlas search indexes to be READY "
             "(default MEMORY_ATLAS_INDEX_WAIT_S; 0: do not wait)",
    )
    parser.set_defaults(func=_create)
