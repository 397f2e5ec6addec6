"""migrate-v1 on documents shaped like the previous system's collections (design §9)."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timezone

import pytest
from bson import ObjectId

from ops import cli
from ops.commands import migrate as migrate_command
from ops.migrate_v1 import SourceCollections, migrate
from ops.v1_plan import plan_migration
from pipeline.embeddings.hashing import HashingEmbedder
from pipeline.store import open_store
from pipeline.store.mongo import MongoStore
from pipeline.text import word_count
from schemas.settings import Settings
from testkit.mongo_emulation import emulated_database

NOW = datetime(2026, 2, 1, tzinfo=timezone.utc)
IDS = {name: ObjectId() for name in (
    "d_listed", "d_unlisted", "d_listed_elsewhere", "d_nobody", "s_listed", "s_unlisted",
    "f_email", "f_dup", "e_episode", "u1", "u2", "shard_tone", "shard_old", "shard_product",
)}


def _sessions() -> list[dict]:
    def mem(key, kind, content, agent="agent-1", users=("u1",), session="old-s1"):
        return {
            "_id": IDS[key], "agent_id": agent, "source_session_id": session, "memory_type": kind,
            "content": content, "source_message_ids": ["m1", "m2"], "related_users": list(users),
            "shard_id": None,
        }

    return [
        mem("d_listed", "directive", "Answer Alice in Spanish."),
        mem("d_unlisted", "directive", "Alice likes short answers."),
        # listed as unabsorbed, but under another agent: its own parent does not list it
        mem("d_listed_elsewhere", "directive", "Bob wants the metric system.", users=("u2",)),
        mem("d_nobody", "directive", "Someone wants emojis.", users=()),
        mem("s_listed", "suggestion", "Offer a summary after long threads."),
        mem("s_unlisted", "suggestion", "Greet people by name."),
        mem("f_email", "fact", "Alice's email is alice@example.com."),
        mem("f_dup", "fact", "alice's email is  alice@example.com."),
        mem("e_episode", "episode", "Alice and the agent talked about Madrid."),
    ]


def _users() -> list[dict]:
    return [
        {"_id": IDS["u1"], "agent_id": "agent-1", "user_id": "u1", "content": "Alice: Spanish, short.",
         "unabsorbed_memory_ids": [str(IDS["d_listed"])]},
        {"_id": IDS["u2"], "agent_id": "agent-2", "user_id": "u2", "content": "Bob: metric.",
         "unabsorbed_memory_ids": [IDS["d_listed_elsewhere"]]},
    ]


def _agents() -> list[dict]:
    return [
        {"_id": IDS["shard_tone"], "agent_id": "agent-1", "shard_name": "TONE", "is_active": True,
         "content": "Be warm and brief.", "unabsorbed_memory_ids": [IDS["s_listed"]]},
        {"_id": IDS["shard_old"], "agent_id": "agent-1", "shard_name": "OLD", "is_active": False,
         "content": "Retired guidance.", "unabsorbed_memory_ids": [], "facts": ["The office was in Leeds."]},
        {"_id": IDS["shard_product"], "agent_id": "agent-1", "shard_name": "PRODUCT", "is_active": True,
         "content": "The shop sells desk lamps.", "unabsorbed_memory_ids": [],
         "facts": ["The shop opens at 9 am.", {"content": "Shipping is free over 50 euros."}]},
    ]


@pytest.fixture
def legacy():
    db = emulated_database("legacy")
    db["memory_sessions"].insert_many(_sessions())
    db["memory_user"].insert_many(_users())
    db["memory_agent"].insert_many(_agents())
    return db


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(store_url=f"sqlite:///{tmp_path / 'target.db'}", embedding_provider="hashing")


@pytest.fixture(params=["sqlite", "mongo"])
def store(request, settings):
    store = open_store(settings) if request.param == "sqlite" else MongoStore(emulated_database(), prefix="memory2_")
    store.create_indexes()
    yield store
    store.close()


def _snapshot(db) -> dict:
    return {name: copy.deepcopy(list(db[name].find({}))) for name in sorted(db.list_collection_names())}


def test_dry_run_counts_every_mapping_and_writes_nothing(legacy, store, settings):
    planned, written = migrate(legacy, store, HashingEmbedder(64), settings, NOW)
    assert written is None
    assert planned == {
        "directives -> user reflections": 3,
        "directives -> user reflections, unabsorbed": 2,   # listed, and one whose user has no blob
        "suggestions -> agent reflections": 2,
        "suggestions -> agent reflections, unabsorbed": 1,
        # the two from the active shard; the two email facts carry contact data of their one
        # related user, so they become that user's facts
        "facts -> agent facts": 2,
        "facts with contact data -> user facts": 2,
        "agent texts with contact data -> user reflections": 0,
        "memory_user -> user blobs": 2,
        "memory_agent shards -> agent blobs": 1,
        "blob texts -> absorbed reflections": 4,   # two memory_user, two active shards
        "blob text over its limit -> unabsorbed reflections": 0,
        "episodes -> dropped": 1,
        "secrets -> dropped": 0,
        "contact data in agent scope -> dropped": 0,
        "unattributed (no v1 user id)": 4,   # the shards' two facts and two texts
        "skipped: directives without related_users": 1,
        "skipped: inactive memory_agent shards": 1,
    }
    assert all(rows == [] for rows in store.admin.dump_all().values())


@pytest.mark.parametrize(
    ("key", "absorbed"),
    # d_listed_elsewhere: its user has no memory_user under its agent, so no blob absorbs it
    [("d_listed", False), ("d_unlisted", True), ("d_listed_elsewhere", False), ("s_listed", False), ("s_unlisted", True)],
)
def test_a_reflection_is_unabsorbed_only_if_its_parent_lists_it(key, absorbed):
    plan = plan_migration(_sessions(), _users(), _agents(), Settings(), NOW)
    by_id = {r.reflection_id: r for r in plan.user_reflections + plan.agent_reflections}
    assert by_id[f"v1:{IDS[key]}"].absorbed is absorbed


def test_directives_become_user_reflections_of_their_related_user_and_suggestions_agent_ones():
    plan = plan_migration(_sessions(), _users(), _agents(), Settings(), NOW)
    directive = next(r for r in plan.user_reflections if r.reflection_id == f"v1:{IDS['d_listed']}")
    assert (directive.scope, directive.user_id, directive.scope_key) == ("user", "u1", "user:u1")
    assert directive.source_session_id == "old-s1"
    assert {r.scope for r in plan.agent_reflections} == {"agent"}


def test_active_shards_become_one_versioned_agent_blob_in_sections():
    plan = plan_migration(_sessions(), _users(), _agents(), Settings(), NOW)
    [blob] = plan.agent_blobs
    assert blob.consolidated_content == (
        "VERSION: 1\n\n[TONE]\nBe warm and brief.\n\n[PRODUCT]\nThe shop sells desk lamps."
    )
    assert "Retired guidance" not in blob.consolidated_content


def test_apply_writes_embedded_facts_reflections_and_blobs(legacy, store, settings):
    embedder = HashingEmbedder(64)
    migrate(legacy, store, embedder, settings, NOW, apply=True)
    facts = store.facts.list_facts("agent-1")
    # the two email facts normalise to the same text: one fact holds it, in its user's scope
    assert sorted((f.scope_key, f.content) for f in facts) == [
        ("agent", "Shipping is free over 50 euros."), ("agent", "The shop opens at 9 am."),
        ("user:u1", "Alice's email is alice@example.com."),
    ]
    assert all(f.embedding and f.embedding_model == embedder.model for f in facts)
    assert [r.content for r in store.reflections.unabsorbed_reflections("agent-1", "user:u1")] == ["Answer Alice in Spanish."]
    assert [r.content for r in store.reflections.unabsorbed_reflections("agent-1", "agent")] == [
        "Offer a summary after long threads."
    ]
    assert store.blobs.get_blob("agent-1", "user:u1").consolidated_content == "Alice: Spanish, short."
    assert store.blobs.get_blob("agent-2", "user:u2").consolidated_content == "Bob: metric."
    assert store.blobs.get_blob("agent-1", "agent").consolidated_content.startswith("VERSION: 1\n\n[TONE]")
    dump = json.dumps(store.admin.dump_all(), default=str)
    assert "Alice and the agent talked about Madrid" not in dump


def test_a_second_apply_writes_nothing_new_and_the_source_is_never_touched(legacy, store, settings):
    before = _snapshot(legacy)
    _, first = migrate(legacy, store, HashingEmbedder(64), settings, NOW, apply=True)
    dump_after_first = store.admin.dump_all()
    _, second = migrate(legacy, store, HashingEmbedder(64), settings, NOW, apply=True)
    assert first["reflections written"] == 9 and first["facts written"] == 3
    assert second.get("reflections written", 0) == 0 and second.get("facts written", 0) == 0
    assert second["user blobs already present"] == 2 and second["agent blobs already present"] == 1
    assert store.admin.dump_all() == dump_after_first
    assert _snapshot(legacy) == before


def test_source_collection_names_are_options(store, settings):
    db = emulated_database("legacy")
    db["old_mem"].insert_many(_sessions())
    names = SourceCollections(sessions="old_mem", users="nothing_u", agents="nothing_a")
    planned, _ = migrate(db, store, None, settings, NOW, collections=names)
    assert planned["facts with contact data -> user facts"] == 2 and planned["memory_user -> user blobs"] == 0


def test_the_command_prints_counts_as_json_and_applies_only_when_asked(legacy, settings, monkeypatch, capsys):
    monkeypatch.setenv("MEMORY_STORE_URL", settings.store_url)
    monkeypatch.setenv("MEMORY_EMBEDDING_PROVIDER", "hashing")
    monkeypatch.setattr(migrate_command, "get_settings", lambda: settings)
    monkeypatch.setattr(migrate_command, "open_source_db", lambda url, db: legacy)
    assert cli.main(["migrate-v1", "--source-url", "mongodb://legacy/db", "--json"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert dry["apply"] is False and dry["written"] is None
    assert dry["planned"]["episodes -> dropped"] == 1
    assert cli.main(["migrate-v1", "--source-url", "mongodb://legacy/db", "--apply", "--json"]) == 0
    applied = json.loads(capsys.readouterr().out)
    assert applied["written"]["reflections written"] == 9


def test_a_source_without_the_v1_collections_is_refused_by_name(settings, monkeypatch, capsys):
    empty = emulated_database("not_v1")
    empty["something_else"].insert_one({"x": 1})
    monkeypatch.setattr(migrate_command, "get_settings", lambda: settings)
    monkeypatch.setattr(migrate_command, "open_source_db", lambda url, db: empty)
    assert cli.main(["migrate-v1", "--source-url", "mongodb://old:secret@legacy/not_v1"]) == 2
    err = capsys.readouterr().err
    assert "source: mongodb://old:**@legacy/not_v1" in err
    assert "memoryctl migrate-v1: no source: database 'not_v1' has none of memory_sessions, memory_user, memory_agent" in err


# --- nothing absorbed into a blob that does not exist; every item within its word limit --------

LONG_DIRECTIVE = (  # 66 words, four sentences
    "Carla runs the quarterly planning for the whole events team and wants every plan as a short table. "
    "She reads on her phone between venues, so keep each answer under ten lines. "
    "Never send her anything on Sundays, she keeps them for family and will not reply. "
    "When a budget changes, tell her the old and the new figure side by side."
)
ONE_LONG_SENTENCE = " ".join(["word"] * 40) + "."


def _carla_source(extra_users=()):
    db = emulated_database("legacy")
    db["memory_sessions"].insert_many([
        {"_id": ObjectId(), "agent_id": "agent-1", "source_session_id": "old-s9", "memory_type": "directive",
         "content": text, "source_message_ids": ["m9"], "related_users": ["u-carla"], "shard_id": None}
        for text in ("Carla prefers answers in Italian.", LONG_DIRECTIVE, f"Carla asked: {ONE_LONG_SENTENCE}")
    ] + [{"_id": ObjectId(), "agent_id": "agent-1", "source_session_id": "old-s9", "memory_type": "fact",
          "content": LONG_DIRECTIVE, "source_message_ids": ["m9"], "related_users": [], "shard_id": None}])
    db["memory_user"].insert_many(list(extra_users) or [{"_id": ObjectId(), "agent_id": "agent-1", "user_id": "u-x",
                                                         "content": "X likes tea.", "unabsorbed_memory_ids": []}])
    db.create_collection("memory_agent")
    return db


def test_a_directive_of_a_user_without_a_v1_blob_waits_in_that_users_buffer(store, settings):
    _, written = migrate(_carla_source(), store, HashingEmbedder(64), settings, NOW, apply=True)
    assert store.blobs.get_blob("agent-1", "user:u-carla") is None
    waiting = [r.content for r in store.reflections.unabsorbed_reflections("agent-1", "user:u-carla")]
    assert "Carla prefers answers in Italian." in waiting
    for row in store.admin.dump_all()["reflections"]:   # absorbed only into a blob that exists
        if row["absorbed"]:
            assert store.blobs.get_blob(row["agent_id"], row["scope_key"]) is not None, row["reflection_id"]


def test_an_item_over_its_word_limit_is_cut_at_sentences_and_a_sentence_over_it_is_refused(store, settings):
    planned, _ = migrate(_carla_source(), store, HashingEmbedder(64), settings, NOW)
    assert planned["skipped: sentences over the 35-word reflection limit"] == 1
    assert "skipped: sentences over the 30-word fact limit" not in planned   # the fact's sentences fit
    _, written = migrate(_carla_source(), store, HashingEmbedder(64), settings, NOW, apply=True)
    dump = store.admin.dump_all()
    reflections = [r["content"] for r in dump["reflections"] if r["scope_key"] == "user:u-carla"]
    facts = [f["content"] for f in dump["facts"]]
    assert all(word_count(r) <= settings.reflection_word_limit for r in reflections)
    assert all(word_count(f) <= settings.fact_word_limit for f in facts)
    # nothing of the long directive is lost: its sentences, in order, across the items
    assert " ".join(r for r in reflections if "Carla prefers" not in r) == LONG_DIRECTIVE
    assert " ".join(facts) == LONG_DIRECTIVE and len(facts) == 3
    assert not any("word word" in r for r in reflections)   # the refused sentence is not stored


def test_records_absorbed_into_a_v1_blob_the_store_did_not_take_wait_to_be_merged(store, settings):
    from schemas.documents import ConsolidatedBlob

    user = {"_id": ObjectId(), "agent_id": "agent-1", "user_id": "u-carla", "content": "Carla: Italian.",
            "unabsorbed_memory_ids": []}
    store.blobs.save_blob(ConsolidatedBlob(agent_id="agent-1", scope="user", scope_key="user:u-carla", user_id="u-carla",
                                     consolidated_content="VERSION: 1\nCarla likes dark mode", word_limit=300,
                                     version=1), expected_version=0)
    migrate(_carla_source([user]), store, HashingEmbedder(64), settings, NOW, apply=True)
    waiting = [r.content for r in store.reflections.unabsorbed_reflections("agent-1", "user:u-carla")]
    assert "Carla prefers answers in Italian." in waiting and "Carla: Italian." in waiting
    assert not [r for r in store.admin.dump_all()["reflections"] if r["scope_key"] == "user:u-carla" and r["absorbed"]]
