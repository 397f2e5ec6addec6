"""Stores made by earlier releases are upgraded in place: facts made before the unique key
became live-only stop blocking their texts once retired; facts made before ``updated_at`` was a
column and validity was kept keep their latest change (<Facts> order) and versions; an old
Mongo message key becomes unique per seq."""

from __future__ import annotations

import sqlite3

from pipeline.store.mongo import MongoStore
from pipeline.store.sqlite import SQLiteStore
from testkit.documents import T0, at, fact
from testkit.mongo_emulation import emulated_database


def test_an_old_sqlite_file_gets_the_live_only_key_when_opened(tmp_path):
    path = str(tmp_path / "old.db")
    SQLiteStore(path).close()
    with sqlite3.connect(path) as conn:  # the key as it was first shipped: every fact
        conn.execute('DROP INDEX "memory2_facts_scope_hash"')
        conn.execute('CREATE UNIQUE INDEX "memory2_facts_scope_hash" ON "memory2_facts" (agent_id, scope_key, hash)')
    store = SQLiteStore(path)
    store.facts.insert_fact(fact("f1", "The launch is on March 3"))
    store.facts.retire_fact("f1", T0, "r1")
    assert store.facts.insert_fact(fact("f2", "The launch is on March 3")) == (True, "f2")
    assert store.facts.insert_fact(fact("f3", "the launch is on march 3")) == (False, "f2")
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
    assert store.facts.insert_fact(fact("f3", "The launch is on March 3")) == (True, "f3")
    assert store.facts.insert_fact(fact("f4", "the office is in PARIS")) == (False, "f2")
    assert store.facts.retire_fact("f2", T0, "r2") is True
    assert store.facts.insert_fact(fact("f5", "The office is in Paris")) == (True, "f5")


# ------------------------------------------------------------------ validity (design §11 Time) ---
def _old_shape(f, *, updated_at=None, history=()) -> dict:
    """A fact document as stored before updated_at was always set and validity was kept."""
    doc = f.model_dump(mode="json", exclude={"embedding", "valid_from", "valid_to"})
    doc["updated_at"] = updated_at.isoformat() if updated_at else None
    doc["history"] = [{"content": c, "version": v, "changed_at": t.isoformat(), "run_id": r} for c, v, t, r in history]
    doc["version"] = len(history) + 1
    return doc


_OLD_FACTS_TABLE = """CREATE TABLE "memory2_facts" (
    fact_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, scope_key TEXT NOT NULL,
    hash TEXT NOT NULL, scope TEXT NOT NULL, user_id TEXT, content TEXT NOT NULL,
    embedding BLOB, embedding_model TEXT, formed_at TEXT NOT NULL, retired_at TEXT,
    doc TEXT NOT NULL)"""


def test_an_sqlite_file_of_the_previous_schema_opens_and_its_facts_keep_their_latest_change(tmp_path):
    import json

    from pipeline.store._common import ts
    from pipeline.validity import version_at

    path = str(tmp_path / "old.db")
    month_ago = at(-30 * 86400)
    home = fact("home", "Alice moved to city B", user="u1", formed=month_ago)
    pet = fact("pet", "Alice has a cat", user="u1", formed=at(-86400))
    gone = fact("gone", "Alice works at Acme", user="u1", formed=at(-2 * 86400))
    rows = [
        (home, _old_shape(home, updated_at=at(0), history=[("Alice lives in city A", 1, at(0), "r2")]), None),
        (pet, _old_shape(pet), None),
        (gone, {**_old_shape(gone), "retired_at": at(-3600).isoformat(), "retired_by": "r3"}, at(-3600)),
    ]
    with sqlite3.connect(path) as conn:
        conn.execute(_OLD_FACTS_TABLE)
        for f, doc, retired in rows:
            conn.execute('INSERT INTO "memory2_facts" VALUES (?, ?, ?, ?, ?, ?, ?, NULL, NULL, ?, ?, ?)',
                         (f.fact_id, f.agent_id, f.scope_key, f.hash, f.scope, f.user_id, doc["content"],
                          ts(f.formed_at), ts(retired), json.dumps(doc)))
    store = SQLiteStore(path)
    week_ago = at(-7 * 86400)
    assert [f.fact_id for f in store.facts.recent_facts("a1", ["user:u1"], week_ago, 10)] == ["home", "pet"]
    home_now, gone_now = store.facts.get_facts(["home", "gone"])
    assert (home_now.updated_at, home_now.valid_from, home_now.formed_at) == (at(0), at(0), month_ago)
    assert version_at(home_now, at(-86400)).content == "Alice lives in city A"
    assert version_at(home_now, at(1)).content == "Alice moved to city B"
    assert gone_now.valid_to == at(-3600) and version_at(gone_now, at(1)) is None
    # no search_text was stored: the text search reads the content
    assert {c.fact_id: c.content for c in store.facts.search_candidates("a1", ["user:u1"], None)} == {
        "home": "Alice moved to city B", "pet": "Alice has a cat"}
    store.facts.insert_fact(fact("new", "Alice likes tea", user="u1", formed=at(5)))
    assert [f.fact_id for f in store.facts.recent_facts("a1", ["user:u1"], week_ago, 10)] == ["new", "home", "pet"]
    store.close()
    SQLiteStore(path).close()  # opening it again changes nothing


def test_old_mongo_facts_get_their_latest_change_from_create_indexes():
    database = emulated_database()
    facts = database["memory2_facts"]
    home = fact("home", "Alice moved to city B", user="u1", formed=at(-30 * 86400))
    pet = fact("pet", "Alice has a cat", user="u1", formed=at(-86400))
    for f, doc in ((home, _old_shape(home, updated_at=at(0), history=[("Alice lives in city A", 1, at(0), "r2")])),
                   (pet, _old_shape(pet))):
        doc = {**doc, "_id": f.fact_id, "live": True, "formed_at": f.formed_at}
        doc["updated_at"] = at(0) if doc["updated_at"] else None
        doc["history"] = [{**h, "changed_at": at(0)} for h in doc["history"]]
        facts.insert_one(doc)
    store = MongoStore(database)
    store.create_indexes()
    assert [f.fact_id for f in store.facts.recent_facts("a1", ["user:u1"], at(-7 * 86400), 10)] == ["home", "pet"]
    (got,) = store.facts.get_facts(["pet"])
    assert (got.updated_at, got.valid_from, got.valid_to) == (pet.formed_at, pet.formed_at, None)
    # the Atlas search index reads search_text: the old facts get their content there
    assert {d["_id"]: d["search_text"] for d in facts.find({}, {"search_text": 1})} == {
        "home": "Alice moved to city B", "pet": "Alice has a cat"}


def test_an_old_mongo_message_key_becomes_unique_per_seq_and_old_interrupted_ingests_still_complete():
    from testkit.documents import at, message

    database = emulated_database()
    messages = database["memory2_messages"]
    messages.create_index([("session_id", 1), ("seq", 1)], name="session_seq", unique=False)  # as first shipped
    store = MongoStore(database)
    store.ingest.ingest_message(message(1), at(1))
    messages.insert_one(message(2).model_dump(exclude={"seq"}))  # the former ingest died after its insert
    messages.insert_one(message(3, session="s2").model_dump(exclude={"seq"}))
    store.create_indexes()
    key = messages.index_information()["session_seq"]
    assert key["unique"] and key["partialFilterExpression"] == {"seq": {"$exists": True}}
    assert store.ingest.ingest_message(message(2), at(2)).seq == 2  # the redelivery stores it anew
    assert [m.seq for m in store.ingest.get_messages("s1", 1, 2)] == [1, 2]
