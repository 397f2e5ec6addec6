"""``bench.doc_sizes`` reports the size of each document as the Mongo store writes it: the same
records stored through ``MongoStore`` encode to the sizes the bench prints, so the cluster
sizing in ``docs/scaling.md`` follows the store when it adds a field."""

from __future__ import annotations

import bson

from pipeline.store.mongo import MongoStore
from pipeline.store.sqlite import SQLiteStore
from testkit.benches import run_bench
from testkit.documents import at, fact, message, reflection
from testkit.mongo_emulation import emulated_database

DIMS = 384


def _fill(store) -> None:
    store.create_indexes()
    for n in (1, 2, 3):
        store.ingest.ingest_message(message(n, content=f"I moved to Porto in {2020 + n}"), at(n))
    vector = [((i % 7) - 3) / 10.0 for i in range(DIMS)]
    store.facts.insert_fact(fact("f1", "Maya lives in Porto", user="u1", embedding=vector))
    store.facts.insert_fact(fact("f2", "The studio opens at 9", embedding=vector))
    store.reflections.insert_reflections([reflection("r1", "Maya prefers mornings")])


def _stored_sizes(database, name: str) -> list[int]:
    return sorted(len(bson.encode(d)) for d in database[f"memory2_{name}"].find({}))


def test_the_bench_sizes_documents_as_the_mongo_store_stores_them(tmp_path):
    url = f"sqlite:///{tmp_path / 'memory.db'}"
    sqlite = SQLiteStore.from_url(url)
    _fill(sqlite)
    sqlite.close()
    database = emulated_database()
    _fill(MongoStore(database))

    out = run_bench("doc_sizes", "--store", url, "--json").figures
    figures = out["collections"]
    assert len(out["load_average"]) == 3
    for name in ("facts", "reflections", "sessions", "messages"):
        stored = _stored_sizes(database, name)
        assert figures[name]["count"] == len(stored), name
        assert figures[name]["max_bytes"] == stored[-1], name
    vector = figures["facts"]["embedding"]
    assert vector["dimensions"] == DIMS
    # an array of doubles costs a type byte and a decimal index key per element beside the 8 bytes
    assert vector["array_of_doubles_bytes"] > 3 * vector["binary_float32_bytes"] > 3 * 4 * DIMS


def test_a_missing_or_non_sqlite_store_is_a_clear_error(tmp_path):
    missing = run_bench("doc_sizes", "--store", f"sqlite:///{tmp_path / 'none.db'}")
    assert missing.code == 2 and "no store at" in missing.err
    mongo = run_bench("doc_sizes", "--store", "mongodb://db/memory")
    assert mongo.code == 2 and "sqlite:///" in mongo.err
