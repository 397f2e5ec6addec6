"""A store made before the facts' unique key became live-only is upgraded in place: its
retired facts stop blocking their texts, and its live facts stay unique."""

from __future__ import annotations

import sqlite3

from pipeline.store.mongo import MongoStore
from pipeline.store.sqlite import SQLiteStore
from tests.support.documents import T0, fact
from tests.support.mongo_emulation import emulated_database


def test_an_old_sqlite_file_gets_the_live_only_key_when_opened(tmp_path):
    path = str(tmp_path / "old.db")
    SQLiteStore(path).close()
    with sqlite3.connect(path) as conn:  # the key as it was first shipped: every fact
        conn.execute('DROP INDEX "memory2_facts_scope_hash"')
        conn.execute('CREATE UNIQUE INDEX "memory2_facts_scope_hash" ON "memory2_facts" (agent_id, scope_key, hash)')
    store = SQLiteStore(path)
    store.insert_fact(fact("f1", "The launch is on March 3"))
    store.retire_fact("f1", T0, "r1")
    assert store.insert_fact(fact("f2", "The launch is on March 3")) == (True, "f2")
    assert store.insert_fact(fact("f3", "the launch is on march 3")) == (False, "f2")
    store.close()


def test_old_mongo_facts_and_index_are_upgraded_by_create_indexes():
    database = emulated_database()
    facts = database["memory2_facts"]
    facts.create_index([("agent_id", 1), ("scope_key", 1), ("hash", 1)], name="agent_scope_hash_unique", unique=True)
    for f in (fact("f1", "The launch is on March 3"), fact("f2", "The office is in Paris")):
        facts.insert_one({**f.model_dump(), "_id": f.fact_id})  # stored before the live flag existed
    facts.update_one({"_id": "f1"}, {"$set": {"retired_at": T0, "retired_by": "r1"}})
    store = MongoStore(database)
    first = store.create_indexes()
    assert store.create_indexes() == first
    assert facts.index_information()["agent_scope_hash_unique"]["partialFilterExpression"] == {"live": True}
    assert store.insert_fact(fact("f3", "The launch is on March 3")) == (True, "f3")
    assert store.insert_fact(fact("f4", "the office is in PARIS")) == (False, "f2")
    assert store.retire_fact("f2", T0, "r2") is True
    assert store.insert_fact(fact("f5", "The office is in Paris")) == (True, "f5")
