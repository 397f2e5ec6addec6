"""A user's own memory switch per agent (design §12): off means nothing new is formed in their
user scope and their user memory is left out of context and search; on again restores it."""

from __future__ import annotations

from datetime import timedelta

from pipeline.clock import FrozenClock
from pipeline.embeddings.hashing import HashingEmbedder
from pipeline.formation.scopes import plan_scopes
from pipeline.service import MemoryService
from schemas.documents import AgentSettings, ConsolidatedBlob
from schemas.settings import Settings
from testkit.documents import T0, fact
from testkit.stores import sqlite_store  # noqa: F401  (the `store` fixture)

EMB = HashingEmbedder(64)
NOW = T0 + timedelta(days=1)


def test_a_switched_off_user_gets_no_user_scope_in_the_plan_and_others_keep_theirs():
    agent = AgentSettings(agent_id="a1")
    off = plan_scopes(agent, "s1", ["u1"], False, {"u1"})
    assert off.fact_scopes == ("agent",) and off.reflection_scopes == ("agent", "session")
    other = plan_scopes(agent, "s2", ["u2"], False, {"u1"})
    assert other.fact_scopes == ("agent", "user") and other.user_id == "u2"


def _memory(store):
    service = MemoryService("a1", settings=Settings(_env_file=None), store=store, embedder=EMB,
                            clock=FrozenClock(NOW))
    for fid, text, user in (("f1", "Alice's email is alice@example.com", "u1"), ("f2", "Mars budget is $50,000", None)):
        f = fact(fid, text, agent="a1", user=user, embedding=EMB.embed([text]).vectors[0], model=EMB.model,
                 formed=NOW - timedelta(hours=1))
        store.facts.insert_fact(f)
        store.leases.bump_scope_versions("a1", [f.scope_key])
    store.blobs.save_blob(ConsolidatedBlob(agent_id="a1", scope="user", scope_key="user:u1", user_id="u1",
                                     consolidated_content="VERSION: 1\nAlice likes short answers.", word_limit=300,
                                     version=1), expected_version=0)
    return service


def test_switching_off_hides_the_users_memory_from_context_and_search_and_on_restores_it(store):
    service = _memory(store)
    before = service.get_memory_context(session_id="s1", user_id="u1")
    assert "alice@example.com" in before and "short answers" in before
    store.access.set_user_memory("a1", "u1", False, NOW)
    hidden = service.get_memory_context(session_id="s1", user_id="u1")  # the cached one is stale now
    assert "alice@example.com" not in hidden and "short answers" not in hidden and "Mars budget" in hidden
    assert [h["id"] for h in service.search_facts("Alice email", session_id="s1", user_id="u1")] in ([], ["f2"])
    assert store.facts.get_facts(["f1"])[0].retired_at is None  # kept until deleted
    store.access.set_user_memory("a1", "u1", True, NOW)
    assert service.get_memory_context(session_id="s1", user_id="u1") == before
    assert "f1" in [h["id"] for h in service.search_facts("Alice email", session_id="s1", user_id="u1")]
