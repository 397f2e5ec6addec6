"""``memoryctl migrate``: a store formed before provenance gets what can be derived (sources of
reflections from their run's messages, the provenance indexes), idempotently, and a count of
what cannot be attributed."""

from __future__ import annotations

import json

import pytest

from ops import cli
from ops.commands import migrate as migrate_command
from pipeline.clock import FrozenClock
from pipeline.forgetting import forget_user, verify_erasure
from pipeline.ingest import ingest_raw_event
from pipeline.store import open_store
from pipeline.store.mongo import MongoStore
from pipeline.text import text_hash
from schemas.documents import Fact, Reflection
from schemas.settings import Settings
from testkit.mongo_emulation import emulated_database


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(store_url=f"sqlite:///{tmp_path / 'memory.db'}")


def _old_store(store, settings):
    """A group chat formed before provenance: the run and its messages are stored, the agent
    reflection it formed (from Bob's message) carries no source users; a v1 fact has no run."""
    clock = FrozenClock()
    for i, (user, text) in enumerate((("ann", "I would like morning calls"), ("bob", "I run the live stream"))):
        assert ingest_raw_event({
            "type": "message.added", "event_id": f"e{i}", "agent_id": "a1", "session_id": "s-group",
            "session_users": ["ann", "bob"],
            "message": {"message_id": f"m{i}", "role": "user", "sender_id": user, "content": text,
                        "created_at": clock.now().isoformat()}}, store, settings, clock).status == "accepted"
    run = ingest_raw_event({"type": "session.ended", "event_id": "end", "agent_id": "a1", "session_id": "s-group"},
                           store, settings, clock).run
    store.reflections.insert_reflections([
        Reflection(reflection_id="r-bob", agent_id="a1", scope="agent", scope_key="agent", content="Bob runs the stream",
                   source_run_id=run.run_id, source_message_ids=["m1"], formed_at=clock.now()),
        Reflection(reflection_id="r-range", agent_id="a1", scope="agent", scope_key="agent",
                   content="The team plans calls", source_run_id=run.run_id, formed_at=clock.now()),
    ])
    store.facts.insert_fact(Fact(fact_id="v1:f", agent_id="a1", scope="agent", scope_key="agent", content="Door code 12",
                           hash=text_hash("Door code 12"), formed_at=clock.now()))


@pytest.mark.parametrize("kind", ["sqlite", "mongo"])
def test_migrate_derives_sources_once_and_counts_what_it_cannot(kind, settings, monkeypatch, capsys):
    store = open_store(settings) if kind == "sqlite" else MongoStore(emulated_database())
    store.create_indexes()
    _old_store(store, settings)
    assert len(store.provenance.unattributed()) == 3

    from pipeline.upgrade import upgrade_store

    first, again = upgrade_store(store), upgrade_store(store)

    assert (first.items_attributed, first.unattributed_items) == (2, 1)
    assert (again.items_attributed, again.unattributed_items) == (0, 1)
    sources = {r.reflection_id: (r.source_user_ids, r.source_message_ids) for r in store.reflections.list_reflections("a1", "agent")}
    assert sources == {"r-bob": (["bob"], ["m1"]), "r-range": (["ann", "bob"], ["m0", "m1"])}
    # erasing Ann now removes what rests on her and keeps Bob's own reflection
    forget_user(store, "ann", "a1", settings=settings)
    assert [r.reflection_id for r in store.reflections.list_reflections("a1", "agent")] == ["r-bob"]
    check = verify_erasure(store, "ann", "a1")
    assert check.passed() and not check.passed(strict=True) and check.unattributed == ["facts:v1:f"]
    store.close()


def test_the_migrate_command_reports_the_counts(settings, monkeypatch, capsys):
    store = open_store(settings)
    _old_store(store, settings)
    store.close()
    monkeypatch.setattr(migrate_command, "get_settings", lambda: settings)
    monkeypatch.setattr("ops.stores.get_settings", lambda: settings, raising=False)
    assert cli.main(["migrate", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["items_attributed"], out["unattributed_items"]) == (2, 1) and out["indexes"]
    assert cli.main(["migrate"]) == 0
    assert "items that cannot be attributed (left, counted)" in capsys.readouterr().out
