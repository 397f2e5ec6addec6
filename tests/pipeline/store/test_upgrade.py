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


def test_an_old_mongo_message_key_becomes_unique_per_seq_and_old_interrupted_ingests_still_complete():
    from tests.support.documents import at, message

    database = emulated_database()
    messages = database["memory2_messages"]
    messages.create_index([("session_id", 1), ("seq", 1)], name="session_seq", unique=False)  # as first shipped
    store = MongoStore(database)
    store.ingest_message(message(1), at(1))
    messages.insert_one(message(2).model_dump(exclude={"seq"}))  # the former ingest died after its insert
    messages.insert_one(message(3, session="s2").model_dump(exclude={"seq"}))
    store.create_indexes()
    key = messages.index_information()["session_seq"]
    assert key["unique"] and key["partialFilterExpression"] == {"seq": {"$exists": True}}
    assert store.ingest_message(message(2), at(2)).seq == 2  # the redelivery stores it anew
    assert [m.seq for m in store.get_messages("s1", 1, 2)] == [1, 2]
