"""``memoryctl migrate-v1``: migrate the previous system's collections (dry run by default);
``memoryctl migrate``: bring this store up to the current version in place (``pipeline.upgrade``)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from pipeline.errors import ConfigurationError
from schemas.settings import get_settings

MONGO_TIMEOUT_MS = 10_000


def open_source_db(url: str, db_name: str | None):
    """The source database, read-only by use (``find`` only), with bounded timeouts."""
    from pymongo import MongoClient
    from pymongo.errors import ConfigurationError as NoDatabase

    client = MongoClient(
        url, serverSelectionTimeoutMS=MONGO_TIMEOUT_MS, connectTimeoutMS=MONGO_TIMEOUT_MS,
        socketTimeoutMS=60_000,
    )
    if db_name:
        return client[db_name]
    try:
        return client.get_default_database()  # pymongo raises when the URL names none
    except NoDatabase:
        client.close()
        raise ConfigurationError("give --source-db or put the database name in --source-url") from None


def _require_source(db, collections) -> None:
    """A source without any of the three collections is a wrong URL, database or name: say so
    instead of planning to migrate nothing."""
    wanted = [collections.sessions, collections.users, collections.agents]
    present = set(db.list_collection_names())  # the first round trip: an unreachable host fails here
    if not present.intersection(wanted):
        raise ConfigurationError(
            f"no source: database {db.name!r} has none of {', '.join(wanted)} (check --source-url, "
            "--source-db and the --*-collection names)"
        )


def _run(args: argparse.Namespace) -> int:
    from ops.migrate_v1 import SourceCollections, migrate
    from pipeline.clock import Clock

    from ops.stores import announce

    settings = get_settings()
    announce("source", args.source_url)
    db = open_source_db(args.source_url, args.source_db)
    collections = SourceCollections(args.sessions_collection, args.users_collection, args.agents_collection)
    _require_source(db, collections)
    store = embedder = None
    if args.apply:
        from ops.stores import open_or_create
        from pipeline.embeddings import open_embedder

        store, embedder = open_or_create(settings), open_embedder(settings)
    try:
        with _progress(quiet=args.json or not args.apply) as bar:
            planned, written = migrate(
                db, store, embedder, settings, Clock().now(), collections=collections, apply=args.apply,
                progress=bar,
            )
    finally:
        if store is not None:
            store.close()
    if args.json:
        print(json.dumps({"apply": args.apply, "planned": planned, "written": written}, sort_keys=True))
        return 0
    print("migrate-v1 " + ("(applied)" if args.apply else "(dry run: nothing written; --apply to write)"))
    for name, count in planned.items():
        print(f"  {name:<50} {count:>8}")
    for name, count in sorted((written or {}).items()):
        print(f"  {name:<50} {count:>8}")
    return 0


@contextmanager
def _progress(*, quiet: bool) -> Iterator:
    """A progress bar on stderr while the plan is written, on a terminal only and never under
    ``--json`` (stdout then holds one JSON document, and scripts read stderr for errors)."""
    from tqdm import tqdm

    with tqdm(desc="migrate-v1", unit="doc", file=sys.stderr, disable=quiet or not sys.stderr.isatty()) as bar:
        def advance(total: int, n: int) -> None:
            bar.total = total
            bar.update(n)

        yield advance


def _upgrade(args: argparse.Namespace) -> int:
    import sys

    from ops.stores import open_existing
    from pipeline.upgrade import upgrade_store

    say = None if args.json or not sys.stderr.isatty() else (lambda line: print(f"migrate: {line}", file=sys.stderr))
    store = open_existing(get_settings())
    try:
        report = upgrade_store(store, say)
    finally:
        store.close()
    if args.json:
        print(json.dumps(report.counts(), sort_keys=True))
        return 0
    print(f"migrate: {len(report.indexes)} indexes in place")
    print(f"  {'items attributed now (sources from their run)':<50} {report.items_attributed:>8}")
    print(f"  {'items that cannot be attributed (left, counted)':<50} {report.unattributed_items:>8}")
    print(f"  {'blobs with text of unknown origin':<50} {report.unexplained_blobs:>8}")
    if report.rejected_indexed:
        print(f"  {'rejected events indexed by the ids they hold':<50} {report.rejected_indexed:>8}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    up = sub.add_parser(
        "migrate", help="bring this store up to the current version in place: indexes, and the sources of items "
                        "stored before provenance (idempotent)",
        description="Creates every index and derives what can be derived for data formed by an earlier version: "
        "the source users of facts and reflections stored without them, from their run's messages. What cannot "
        "be attributed is counted, never guessed.",
    )
    up.add_argument("--json", action="store_true", help="print the counts as one JSON object")
    up.set_defaults(func=_upgrade)
    p = sub.add_parser(
        "migrate-v1",
        help="migrate the previous memory system's collections (dry run unless --apply)",
        description="Reads memory_sessions, memory_user and memory_agent (never writes them) and "
        "maps them as design §9 says into the store of MEMORY_STORE_URL.",
    )
    p.add_argument("--source-url", required=True, help="MongoDB URL of the previous system")
    p.add_argument("--source-db", help="its database (default: the one named in the URL)")
    p.add_argument("--sessions-collection", default="memory_sessions")
    p.add_argument("--users-collection", default="memory_user")
    p.add_argument("--agents-collection", default="memory_agent")
    p.add_argument("--apply", action="store_true", help="write (default: dry run, counts only)")
    p.add_argument("--json", action="store_true", help="print the counts as one JSON object")
    p.set_defaults(func=_run)
