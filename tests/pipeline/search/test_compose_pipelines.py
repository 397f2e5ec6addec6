"""The compose stack's settings (docker-compose.yml turns Atlas search on) against the strict
Atlas emulation: every search pipeline that stack sends (the agent's semantic and text search,
dedup's shortlist) is built by the real code paths and must pass Atlas's rules."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml

from pipeline.embeddings import open_embedder
from pipeline.formation import candidates
from pipeline.formation.facts import NewFact
from pipeline.search import open_search
from pipeline.search.atlas import AtlasFactSearch
from pipeline.search.atlas_indexes import create_search_indexes
from pipeline.service import MemoryService
from pipeline.store.mongo import MongoStore
from schemas.settings import Settings
from testkit.documents import fact
from testkit.mongo_emulation import emulated_database

COMPOSE = Path(__file__).resolve().parents[3] / "docker-compose.yml"
_VARIABLE = re.compile(r"\$\{(\w+)(?::?[-?][^}]*)?\}")


def compose_settings(monkeypatch) -> Settings:
    """The workers' settings as compose sets them (``x-app`` environment); secrets and
    provider keys empty, as in a stack started without keys."""
    env = yaml.safe_load(COMPOSE.read_text())["x-app"]["environment"]
    for name in [n for n in os.environ if n.startswith("MEMORY_")]:
        monkeypatch.delenv(name)
    for key in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        if key.startswith("MEMORY_"):
            monkeypatch.setenv(key, _VARIABLE.sub("secret", str(value)))
    return Settings(_env_file=None)


@pytest.fixture
def stack(monkeypatch):
    settings = compose_settings(monkeypatch)
    assert settings.atlas_search, "the compose stack runs with Atlas search"
    store = MongoStore(emulated_database(), prefix=settings.collection_prefix)
    store.create_indexes()
    outcomes = create_search_indexes(store, settings, wait_s=0, progress=lambda line: None)
    assert [o.status for o in outcomes] == ["READY", "READY"]
    embedder = open_embedder(settings)
    search = open_search(store, settings)
    assert isinstance(search, AtlasFactSearch)
    for fact_id, text in [("f1", "The launch event is on March 14 in Lisbon"),
                          ("f2", "Maya prefers short answers")]:
        store.facts.insert_fact(fact(fact_id, text, agent="agent-1", embedding=embedder.embed([text]).vectors[0],
                               model=embedder.model))
    return settings, store, embedder, search


def _sent(store) -> list[str]:
    return [next(iter(p[0])) for p in store.col("facts").search_catalog.sent]


def test_the_agents_search_sends_pipelines_atlas_accepts(stack):
    settings, store, embedder, search = stack
    service = MemoryService("agent-1", settings=settings, store=store, search=search, embedder=embedder)
    found = service.search_facts("when is the launch in Lisbon?", user_id="u1", session_id="s1")
    assert found and found[0]["id"] == "f1"
    assert sorted(set(_sent(store))) == ["$search", "$vectorSearch"]


def test_the_dedup_shortlist_sends_pipelines_atlas_accepts(stack):
    settings, store, embedder, search = stack
    text = "The launch event is on March 14 in Lisbon, Portugal"
    new = NewFact(index=0, scope="agent", scope_key="agent", text=text, hash="h0")
    found = candidates.shortlist(search, "agent-1", [new], {0: embedder.embed([text]).vectors[0]}, embedder.model,
                                 limit=candidates.SHORTLIST_FACTOR * settings.dedup_max_candidates)
    assert found[0][0] == "f1"
    assert sorted(_sent(store)) == ["$search", "$vectorSearch"]


def test_on_atlas_an_expired_fact_is_out_of_the_agents_search_before_beat_stamps_it(stack):
    from datetime import timedelta

    from pipeline.clock import FrozenClock
    from pipeline.store.port import FactUpdate

    settings, store, embedder, search = stack
    clock = FrozenClock(store.facts.get_facts(["f1"])[0].formed_at + timedelta(days=1))
    f1 = store.facts.get_facts(["f1"])[0]
    store.facts.update_fact("f1", FactUpdate(content=f1.content, hash=f1.hash, embedding=f1.embedding,
                                       embedding_model=f1.embedding_model, run_id="edit:1", now=clock.now(),
                                       valid_from=f1.valid_from, expires_at=clock.now() + timedelta(hours=1)))
    service = MemoryService("agent-1", settings=settings, store=store, search=search, embedder=embedder, clock=clock)
    assert [h["id"] for h in service.search_facts("when is the launch in Lisbon?", user_id="u1", session_id="s1")
            ][:1] == ["f1"]
    clock.advance(hours=1)   # the index still holds f1 as live: nothing stamped it
    found = service.search_facts("when is the launch in Lisbon?", user_id="u1", session_id="s1")
    assert "f1" not in [h["id"] for h in found]
    earlier = service.search_facts("when is the launch in Lisbon?", user_id="u1", session_id="s1",
                                   as_of=clock.now() - timedelta(minutes=30))
    assert [h["id"] for h in earlier][:1] == ["f1"]
