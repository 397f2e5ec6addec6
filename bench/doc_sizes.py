"""How big each stored document is on MongoDB: ``python -m bench.doc_sizes [--store URL] [--json]``.

Reads a SQLite store (default: ``MEMORY_STORE_URL``, e.g. the one ``make demo`` leaves in
``.runtime/demo.db``), shapes every document the way ``pipeline.store.mongo`` writes it (the
same ``to_doc`` and field additions: a fact's ``live``, ``search_text`` and ``labels``, a run's escaped
keys, a context's version pairs) and encodes it with pymongo's BSON encoder. Per collection it
prints the count and the mean, median and largest size in bytes; for facts also the share of
the embedding, stored as an array of doubles (what ``$vectorSearch`` indexes), beside what the
same vector takes as BSON binary float32.

``docs/scaling.md`` sizes a MongoDB cluster from these figures. It reads the whole store
(``dump_all``: an audit, not a production path); run it on a small store. The last line
printed is one JSON object, with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import bson

from pipeline.store.mongo.codec import escape_keys, to_doc
from pipeline.store.mongo.facts import LABELS, LIVE, SEARCH_TEXT
from pipeline.store.sqlite import SQLiteStore
from schemas.documents import (
    CachedContext, ConsolidatedBlob, Fact, FormationRun, Reflection, SessionState, StoredMessage, UsageRecord,
)


def _fact(data: dict) -> dict:
    fact = Fact.model_validate(data)
    doc = to_doc(fact, fact.fact_id)
    doc[LIVE] = fact.retired_at is None
    doc[SEARCH_TEXT] = fact.search_text
    doc[LABELS] = fact.labels
    return doc


def _context(data: dict) -> dict:
    cached = CachedContext.model_validate(data)
    doc = to_doc(cached)
    doc["versions"] = [{"k": k, "v": v} for k, v in cached.versions.items()]
    return doc


def _run(data: dict) -> dict:
    run = FormationRun.model_validate(data)
    return escape_keys(to_doc(run, run.run_id))


# collection -> the document MongoStore stores for one SQLite record (``mongo.py`` and mixins)
SHAPES = {
    # insert_one(to_doc(message)): the server adds an ObjectId _id (12 bytes and its key)
    "messages": lambda d: {"_id": bson.ObjectId(), **to_doc(StoredMessage.model_validate(d))},
    "sessions": lambda d: to_doc(SessionState.model_validate(d), d["session_id"]),
    "runs": _run,
    "facts": _fact,
    "reflections": lambda d: to_doc(Reflection.model_validate(d), d["reflection_id"]),
    "consolidated": lambda d: {"_id": bson.ObjectId(), **to_doc(ConsolidatedBlob.model_validate(d))},
    "contexts": _context,
    "usage": lambda d: escape_keys(to_doc(UsageRecord.model_validate(d), d["usage_id"])),
}


def _summary(sizes: list[int]) -> dict:
    if not sizes:
        return {"count": 0}
    return {"count": len(sizes), "mean_bytes": round(statistics.fmean(sizes)),
            "median_bytes": round(statistics.median(sizes)), "max_bytes": max(sizes)}


def measure(store: SQLiteStore) -> dict:
    """Per collection, the BSON sizes of its documents as the Mongo store writes them."""
    dump = store.admin.dump_all()
    out: dict = {}
    for name, shape in SHAPES.items():
        out[name] = _summary([len(bson.encode(shape(d))) for d in dump.get(name, [])])
    vectors = [d["embedding"] for d in dump.get("facts", []) if d.get("embedding")]
    if vectors:
        dims = len(vectors[0])
        as_array = len(bson.encode({"embedding": [float(x) for x in vectors[0]]}))
        as_binary = len(bson.encode({"embedding": bson.Binary(bytes(4 * dims), 9)}))
        out["facts"]["embedding"] = {"dimensions": dims, "array_of_doubles_bytes": as_array,
                                     "binary_float32_bytes": as_binary}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.doc_sizes", description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=os.environ.get("MEMORY_STORE_URL", "sqlite:///.runtime/demo.db"),
                        help="a SQLite store URL (default: MEMORY_STORE_URL, else the demo's store)")
    parser.add_argument("--json", action="store_true", help="print only the JSON object")
    args = parser.parse_args(argv)
    if not args.store.startswith("sqlite:///"):
        print(f"--store must be a sqlite:/// URL, got {args.store!r}", file=sys.stderr)
        return 2
    path = args.store[len("sqlite:///"):]
    if not os.path.exists(path):
        print(f"no store at {path} (make demo creates .runtime/demo.db)", file=sys.stderr)
        return 2
    store = SQLiteStore.from_url(args.store)
    try:
        result = {"store": args.store, "collections": measure(store), "load_average": list(os.getloadavg())}
    finally:
        store.close()
    if not args.json:
        for name, figures in result["collections"].items():
            print(f"{name:>13}: {figures}", file=sys.stderr)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
