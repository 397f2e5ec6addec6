"""``memoryctl migrate-v1`` under the guarantees of design §11: what it copies is screened,
every blob is within its word limit (the rest merged later through consolidation), and
provenance from ``related_users`` and v1 user ids lets ``forget-user`` erase a v1 user.

The real command runs on the previous system's collections (design §9) in the Mongo
emulation, into a SQLite store; ``forget-user`` runs as an operator would run it next."""

from __future__ import annotations

import io
import json
import re

import pytest
from bson import ObjectId

from ops import cli
from ops.commands import forget as forget_command
from ops.commands import migrate as migrate_command
from pipeline.clock import FrozenClock
from pipeline.embeddings.hashing import HashingEmbedder
from pipeline.formation import consolidate_stages as cs
from pipeline.formation.runner import Usage
from pipeline.llm.offline import OfflineLLM
from pipeline.search.local import LocalFactSearch
from pipeline.store.sqlite import SQLiteStore
from pipeline.text import word_count
from schemas.documents import AgentSettings, ConsolidatedBlob
from schemas.settings import Settings
from testkit.formation import Env
from testkit.mongo_emulation import emulated_database

ALICE, BOB, AGENT = "user-alice", "user-bob", "agent-1"
PASSWORD, CARD, KEY = "Lumen-2026!", "4111 1111 1111 1111", "sk-proj-abcdEFGH1234ijklMNOP5678qrst"
TOPICS = ("PREFERENCES", "WORK", "TRAVEL")


def _bob_blob() -> str:
    """387 words in three sections (32 sentences of 12 words, 3 headers), against the user
    limit of 300."""
    sections, n = [], 0
    for topic, count in zip(TOPICS, (11, 11, 10)):
        lines = [f"Bob noted {topic.lower()} detail number {i} and wants it kept for later." for i in range(n, n + count)]
        n += count
        sections.append(f"[{topic}]\n" + " ".join(lines))
    return "\n\n".join(sections)


def _sessions() -> list[dict]:
    def mem(kind, content, users):
        return {"_id": ObjectId(), "agent_id": AGENT, "source_session_id": "v1-s1", "memory_type": kind,
                "content": content, "source_message_ids": ["v1-m1"], "related_users": list(users), "shard_id": None}

    return [
        mem("fact", f"The staging password is {PASSWORD}", [ALICE]),
        mem("fact", "Bob's email is bob@home.example", [BOB]),
        mem("fact", "Bob and Alice share the budget sheet", [ALICE, BOB]),
        mem("fact", "Alice runs the design reviews", [ALICE]),
        mem("directive", "Answer Bob in metric units", [BOB]),
        mem("directive", "Answer Alice in Spanish", [ALICE]),
        mem("suggestion", f"Greet {BOB} by first name", [BOB]),
        mem("suggestion", "Send the weekly summary on Fridays", []),
    ]


def _users() -> list[dict]:
    return [
        {"_id": ObjectId(), "agent_id": AGENT, "user_id": ALICE, "unabsorbed_memory_ids": [],
         "content": f"[PREFERENCES]\nAlice prefers short answers. Alice pays with {CARD}."},
        {"_id": ObjectId(), "agent_id": AGENT, "user_id": BOB, "unabsorbed_memory_ids": [], "content": _bob_blob()},
    ]


def _agents() -> list[dict]:
    return [{"_id": ObjectId(), "agent_id": AGENT, "shard_name": "OPS", "is_active": True, "unabsorbed_memory_ids": [],
             "content": f"Deploys use {KEY}. Releases go out on Tuesdays.", "facts": ["The office opens at 9 am."]}]


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(_env_file=None, store_url=f"sqlite:///{tmp_path / 'target.db'}", embedding_provider="hashing",
                    llm_provider="offline")


@pytest.fixture
def memoryctl(settings, monkeypatch, capsys):
    """``memoryctl`` on the v1 source and the target store; returns (exit code, stdout JSON, stderr)."""
    legacy = emulated_database("legacy")
    legacy["memory_sessions"].insert_many(_sessions())
    legacy["memory_user"].insert_many(_users())
    legacy["memory_agent"].insert_many(_agents())
    monkeypatch.setenv("MEMORY_STORE_URL", settings.store_url)
    for module in (migrate_command, forget_command):
        monkeypatch.setattr(module, "get_settings", lambda: settings)
    monkeypatch.setattr(migrate_command, "open_source_db", lambda url, db: legacy)

    def run(*args: str):
        code = cli.main(list(args))
        out = capsys.readouterr()
        return code, (json.loads(out.out) if "--json" in args else out.out), out.err

    return run


def _migrate(memoryctl):
    code, out, _ = memoryctl("migrate-v1", "--source-url", "mongodb://legacy/v1", "--apply", "--json")
    assert code == 0
    return out


def _dump(settings) -> dict:
    store = SQLiteStore(settings.store_url.removeprefix("sqlite:///"))
    try:
        return store.admin.dump_all()
    finally:
        store.close()


def test_a_password_fact_a_card_in_a_user_blob_and_a_key_in_a_shard_are_not_migrated(memoryctl, settings):
    out = _migrate(memoryctl)
    stored = json.dumps(_dump(settings), default=str)
    assert PASSWORD not in stored and CARD not in stored and KEY not in stored
    assert out["planned"]["secrets -> dropped"] == 3
    # what stood beside them is migrated
    assert "Alice prefers short answers." in stored and "Releases go out on Tuesdays." in stored


def test_a_user_blob_over_its_limit_is_stored_within_it_and_the_rest_waits_for_consolidation(memoryctl, settings):
    original = _bob_blob()
    assert word_count(original) == 387
    out = _migrate(memoryctl)
    [blob] = [b for b in _dump(settings)["consolidated"] if b["scope_key"] == f"user:{BOB}"]
    assert word_count(blob["consolidated_content"]) <= settings.word_limit("user")
    assert all(f"[{topic}]" in blob["consolidated_content"] for topic in TOPICS)
    waiting = [r for r in _dump(settings)["reflections"]
               if r["scope_key"] == f"user:{BOB}" and not r["absorbed"] and r["content"].startswith("Bob noted")]
    assert out["planned"]["blob text over its limit -> unabsorbed reflections"] == len(waiting) > 0
    # nothing the old blob held is lost: every sentence is in the blob or waits to be merged
    sentences = re.findall(r"Bob noted [^.]*\.", original)
    kept = blob["consolidated_content"] + " ".join(r["content"] for r in waiting)
    assert all(s in kept for s in sentences)

    # the next consolidation of the scope merges them through the model, within the limit
    store = SQLiteStore(settings.store_url.removeprefix("sqlite:///"))
    try:
        env = Env(settings, store, OfflineLLM(settings), HashingEmbedder(64), LocalFactSearch(store), FrozenClock())
        outcome = cs.merge_scope(env, AGENT, f"user:{BOB}", model="offline", holder="h", usage=Usage())
        assert outcome["status"] == "merged"
        assert word_count(store.blobs.get_blob(AGENT, f"user:{BOB}").consolidated_content) <= settings.word_limit("user")
        assert store.reflections.unabsorbed_reflections(AGENT, f"user:{BOB}") == []
    finally:
        store.close()
    # a second migration finds its text merged into a later version, and writes nothing
    again = _migrate(memoryctl)["written"]
    assert again["user blobs already present"] == 2 and again.get("reflections written", 0) == 0
    [blob] = [b for b in _dump(settings)["consolidated"] if b["scope_key"] == f"user:{BOB}"]
    assert blob["version"] == 2


def test_a_scope_that_already_has_a_blob_keeps_it_and_gets_the_v1_text_to_merge(memoryctl, settings):
    store = SQLiteStore(settings.store_url.removeprefix("sqlite:///"))
    try:
        store.create_indexes()
        store.blobs.save_blob(ConsolidatedBlob(
            agent_id=AGENT, scope="user", scope_key=f"user:{ALICE}", user_id=ALICE,
            consolidated_content="VERSION: 1\n[PREFERENCES]\n- Alice likes dark mode", word_limit=300, version=1,
            last_consolidated_at=FrozenClock().now()), expected_version=0)
    finally:
        store.close()
    written = _migrate(memoryctl)["written"]
    assert written["user blobs kept; v1 text -> unabsorbed reflection"] == 1
    dump = _dump(settings)
    [blob] = [b for b in dump["consolidated"] if b["scope_key"] == f"user:{ALICE}"]
    assert blob["consolidated_content"].endswith("Alice likes dark mode")
    waiting = [r["content"] for r in dump["reflections"] if r["scope_key"] == f"user:{ALICE}" and not r["absorbed"]]
    assert "[PREFERENCES]\nAlice prefers short answers." in waiting


def test_forget_user_erases_a_v1_user_and_counts_shard_text_as_unattributed(memoryctl, settings):
    _migrate(memoryctl)
    facts = {f["content"]: f for f in _dump(settings)["facts"]}
    assert facts["Bob's email is bob@home.example"]["scope_key"] == f"user:{BOB}"   # contact data: his scope
    assert facts["Bob and Alice share the budget sheet"]["source_user_ids"] == [ALICE, BOB]
    assert facts["Alice runs the design reviews"]["source_message_ids"] == ["v1-m1"]

    code, out, _ = memoryctl("forget-user", "--user", BOB, "--all-agents", "--verify", "--json")

    dump = _dump(settings)
    rows = [row for name in ("facts", "reflections", "consolidated") for row in dump[name]]
    assert not [r for r in rows if BOB in (r.get("source_user_ids") or []) or r.get("scope_key") == f"user:{BOB}"]
    assert "bob@home.example" not in json.dumps(dump, default=str)
    assert f"Greet {BOB}" not in json.dumps(dump, default=str)
    # Alice's memory stays; the shard's text and fact and the suggestion nobody was related to
    # carry no user id: left, and counted apart
    left = {r["content"] for r in rows if "content" in r}
    assert {"Alice runs the design reviews", "Answer Alice in Spanish"} <= left
    assert {"Releases go out on Tuesdays.", "The office opens at 9 am.", "Send the weekly summary on Fridays"} <= left
    assert out["deleted"]["unattributed"] == 3
    assert code == 0


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_shows_on_a_terminal_and_never_under_json(memoryctl, monkeypatch):
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    code, _, _ = memoryctl("migrate-v1", "--source-url", "mongodb://legacy/v1", "--apply")
    assert code == 0 and re.search(r"migrate-v1: 100%\|.*\| \d+/\d+", terminal.getvalue())

    quiet = _Terminal()
    monkeypatch.setattr("sys.stderr", quiet)
    code, out, _ = memoryctl("migrate-v1", "--source-url", "mongodb://legacy/v1", "--apply", "--json")
    assert code == 0 and "migrate-v1:" not in quiet.getvalue() and out["apply"] is True


def test_with_user_memory_off_contact_data_is_dropped_not_moved(memoryctl, settings):
    store = SQLiteStore(settings.store_url.removeprefix("sqlite:///"))
    try:
        store.create_indexes()
        store.ingest.put_agent_settings(AgentSettings(agent_id=AGENT, user_memory_enabled=False))
    finally:
        store.close()
    out = _migrate(memoryctl)
    assert out["planned"]["facts with contact data -> user facts"] == 0
    assert out["planned"]["contact data in agent scope -> dropped"] == 2   # Bob's email, the greeting
    assert "bob@home.example" not in json.dumps(_dump(settings), default=str)
